#pragma once

#include "messages/actors.hpp"

#include <caf/fwd.hpp>

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

namespace taskmill {

/// Whether every actor of a node still lives. The supervisor sets it once;
/// whoever runs the node waits on it and stops the node.
class node_health {
 public:
  /// Records the first failure; later ones add nothing.
  void fail(std::string why);
  bool failed() const;
  /// What failed, empty while nothing did.
  std::string failure() const;
  /// Waits up to `timeout`; true once something failed.
  bool wait_for_failure(std::chrono::milliseconds timeout) const;

 private:
  mutable std::mutex mutex_;
  mutable std::condition_variable changed_;
  std::optional<std::string> failure_;
};

/// Monitors the actors it is told to watch. A node whose actor died (an
/// exception escaped it, or a bug ended it) must not go on heartbeating and
/// leading while part of it is dead: the supervisor logs which actor died and
/// why, and marks the node failed.
supervisor_actor spawn_supervisor(caf::actor_system& sys, std::string node,
                                  std::shared_ptr<node_health> health);

}  // namespace taskmill
