#pragma once

// The counts of finished tasks GET /v1/stats answers with once the task table
// is too large to count them (taskmill.finished_counts in
// storage/sql/metrics.sql): each estimate is a sample of some 800 pages
// scattered over the table, a random read of a table that no longer fits in
// memory. The console asks for the stats every 2 s, and each open console
// and script asks apart; an estimate is taken at most once every held_for
// and answered meanwhile, so the database samples once per node and period
// however many ask. Live tasks are counted at every call.

#include "node.pb.h"

#include <chrono>
#include <optional>
#include <vector>

namespace taskmill::db {

class finished_estimate {
 public:
  using clock = std::chrono::steady_clock;

  /// How long an estimate is answered with: the counts shown as estimates
  /// (≈ in the console) lag the table by at most as much.
  static constexpr std::chrono::seconds held_for{10};

  /// What the database answered to taskmill.finished_counts.
  enum class found {
    /// Counted: the table is small; nothing is held.
    counted,
    /// Estimated from a sample.
    sampled,
    /// Not sampled, as asked: the table is large.
    not_sampled,
  };

  /// Whether a call at `now` asks the database for a sample, should the
  /// table be too large to count: when nothing is held, or what is held is
  /// older than held_for and no call asked for a sample within held_for
  /// (one that failed is asked again after that). A call that asks counts
  /// as asking.
  bool ask_for_sample(clock::time_point now);

  /// The finished counts to answer with, given what the database `found`
  /// (`rows`, empty unless counted or sampled) at `now`.
  std::vector<pb::StatusCount> answer(found kind, std::vector<pb::StatusCount> rows,
                                      clock::time_point now);

 private:
  std::vector<pb::StatusCount> held_;
  /// When the held estimate was sampled; empty once a count replaced it.
  std::optional<clock::time_point> sampled_at_;
  /// When the last call asked for a sample that has not come back.
  std::optional<clock::time_point> asked_at_;
};

}  // namespace taskmill::db
