#pragma once

// Executors turn a task into an outcome (SPEC §4). Every outcome names the
// execution it ends, so that storage can fence it by attempt.

#include "node.pb.h"

#include <string>

namespace taskmill {

/// The outcome `kind` of attempt `attempt` of task `task_id` of `type`.
pb::TaskOutcome outcome_of(int64_t task_id, int32_t attempt, const std::string& type,
                           pb::ExecutionOutcome kind, std::string error = {},
                           std::string result = {});

/// The outcome `kind` of `task`'s current attempt.
pb::TaskOutcome outcome_of(const pb::Task& task, pb::ExecutionOutcome kind, std::string error = {},
                           std::string result = {});

}  // namespace taskmill
