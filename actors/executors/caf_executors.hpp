#pragma once

// CAF executors (SPEC §4): actors, in this process or connected to it, that
// register for types with a capacity and answer each task with its outcome.

#include "messages/actors.hpp"

#include <string>
#include <vector>

namespace taskmill {

/// Why an execution on a CAF executor that died is a failed attempt.
inline constexpr const char* executor_went_away = "the executor went away";

/// The registered executors and how busy each is.
class caf_executor_pool {
 public:
  /// Adds an executor; an error if it has no types or no capacity.
  caf::error add(executor_actor handle, const pb::ExecutorRegistration& registration);

  /// Removes the executor at `gone`; answers the types it ran (none if it
  /// was not registered).
  std::vector<std::string> remove(const caf::actor_addr& gone);

  /// The executor with the most room for `type`, now one place busier; null
  /// if none runs the type.
  executor_actor take(const std::string& type);

  /// An execution on the executor at `executor` is over.
  void release(const caf::actor_addr& executor);

  /// The places of all executors of `type` together.
  int32_t capacity(const std::string& type) const;

 private:
  struct member {
    executor_actor handle;
    std::vector<std::string> types;
    int32_t capacity = 0;
    int32_t busy = 0;

    bool runs(const std::string& type) const;
  };

  std::vector<member> members_;
};

/// An executor's answer as the outcome of `task`'s attempt.
pb::TaskOutcome outcome_of_reply(const pb::Task& task, pb::TaskOutcome reply);

/// The outcome of `task`'s attempt when its executor could not answer.
pb::TaskOutcome outcome_of_failure(const pb::Task& task, const caf::error& err);

}  // namespace taskmill
