#include "actors/executors/outcome.hpp"

namespace taskmill {

pb::TaskOutcome outcome_of(int64_t task_id, int32_t attempt, const std::string& type,
                           pb::ExecutionOutcome kind, std::string error, std::string result) {
  pb::TaskOutcome out;
  out.set_task_id(task_id);
  out.set_attempt(attempt);
  out.set_type(type);
  out.set_outcome(kind);
  out.set_error(std::move(error));
  out.set_result(std::move(result));
  return out;
}

pb::TaskOutcome outcome_of(const pb::Task& task, pb::ExecutionOutcome kind, std::string error,
                           std::string result) {
  return outcome_of(task.id(), task.attempt(), task.type(), kind, std::move(error),
                    std::move(result));
}

}  // namespace taskmill
