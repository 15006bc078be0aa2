#include "actors/executors/builtin.hpp"

#include "actors/executors/outcome.hpp"

#include <charconv>

namespace taskmill {

pb::TaskOutcome instant_outcome(executor_kind kind, const pb::Task& task) {
  if (kind == executor_kind::fail)
    return outcome_of(task, pb::OUTCOME_FAIL, "the fail executor fails every task");
  return outcome_of(task, pb::OUTCOME_SUCCEEDED);
}

std::chrono::milliseconds sleep_time(const pb::Task& task) {
  const auto& payload = task.payload();
  auto pos = payload.find_first_of("0123456789");
  auto key = payload.find("\"ms\"");
  if (key != std::string::npos) pos = payload.find_first_of("0123456789", key);
  if (pos == std::string::npos) return {};
  int64_t ms = 0;
  std::from_chars(payload.data() + pos, payload.data() + payload.size(), ms);
  return std::chrono::milliseconds{ms};
}

}  // namespace taskmill
