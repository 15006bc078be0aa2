#include "actors/executors/builtin.hpp"

#include "actors/executors/outcome.hpp"

#include <charconv>

namespace taskmill {

pb::TaskOutcome instant_outcome(executor_kind kind, const pb::Task& task) {
  if (kind == executor_kind::fail)
    return outcome_of(task, pb::OUTCOME_FAIL, "the fail executor fails every task");
  auto outcome = outcome_of(task, pb::OUTCOME_SUCCEEDED);
  // As PostgreSQL prints the jsonb it was stored as.
  if (task.payload() == R"({"report_start": true})") {
    auto now = std::chrono::system_clock::now().time_since_epoch();
    outcome.set_result(
        R"({"started_at_us": )" +
        std::to_string(std::chrono::duration_cast<std::chrono::microseconds>(now).count()) + "}");
  }
  return outcome;
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
