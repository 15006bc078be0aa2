#pragma once

// A dispatcher's outcomes between an execution's end and the database:
// recorded and not sent yet, sent in batches and not answered yet, and those
// storage failed to take, sent again in the order they failed so that one
// node's outcomes are stored in the order they ended. Nothing here talks to
// anyone: the dispatcher sends the batches and tells the answers.

#include "node.pb.h"

#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

namespace taskmill {

class outcome_batches {
 public:
  using batch = std::shared_ptr<const pb::TaskOutcomes>;

  /// An execution ended: its outcome waits for the next batch.
  void record(pb::TaskOutcome outcome);
  /// The outcomes recorded since the last batch, as a batch on its way to
  /// storage; none (nullptr) if nothing was recorded.
  batch take_recorded();
  /// `one`, made elsewhere (a result reported to the API), is on its way.
  void sending(batch one);
  /// Storage answered for `one` (stored, or stale).
  void answered(const batch& one);
  /// Storage did not take `one`: it is to be sent again after those that
  /// failed before it.
  void failed(const batch& one);
  /// The batch to send again first; nullptr if none waits.
  batch take_failed();

  /// Whether `task_id`'s outcome is recorded, on its way or to be sent again.
  bool holds(int64_t task_id) const;
  /// Outcomes not stored yet, wherever they are.
  int32_t not_stored() const;

 private:
  pb::TaskOutcomes recorded_;
  std::vector<batch> on_their_way_;
  std::deque<batch> to_send_again_;
};

}  // namespace taskmill
