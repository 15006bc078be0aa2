#include "actors/executors/http_executor.hpp"

#include "actors/executors/outcome.hpp"
#include "messages/errors.hpp"
#include "messages/json_codec.hpp"
#include "messages/text.hpp"
#include "messages/validate.hpp"

namespace taskmill {

namespace {

std::string hex(uint64_t value, int digits) {
  std::string out(digits, '0');
  for (int i = digits - 1; i >= 0; --i, value >>= 4) out[i] = "0123456789abcdef"[value & 15];
  return out;
}

bool retryable(int status) {
  return status == 408 || status == 425 || status == 429 || status >= 500;
}

}  // namespace

http_call http_call_for(const pb::Task& task, const std::string& url, std::mt19937_64& rng) {
  http_call call;
  call.url = url;
  call.body = json::encode_execution(task);
  call.timeout = std::chrono::milliseconds{task.timeout_ms()};
  call.headers.emplace_back("Idempotency-Key",
                            std::to_string(task.id()) + "-" + std::to_string(task.attempt()));
  auto trace = task.trace_id().size() == 32 ? task.trace_id() : hex(rng(), 16) + hex(rng(), 16);
  call.headers.emplace_back("traceparent", "00-" + trace + "-" + hex(rng(), 16) + "-01");
  return call;
}

http_call cancel_call_for(const pb::CancelNotice& cancel, const std::string& url) {
  http_call call;
  call.method = "DELETE";
  call.url = url;
  call.body = json::encode_cancel(cancel.task_id(), cancel.type(), cancel.key(), cancel.attempt());
  call.headers.emplace_back(
      "Idempotency-Key", std::to_string(cancel.task_id()) + "-" + std::to_string(cancel.attempt()));
  return call;
}

bool cancel_heard(const http_answer& answer) {
  return (answer.status >= 200 && answer.status < 300) || answer.status == 404 ||
         answer.status == 410;
}

std::optional<pb::TaskOutcome> outcome_of_answer(const pb::Task& task, const http_answer& answer) {
  if (answer.status == 0) return outcome_of(task, pb::OUTCOME_RETRY, answer.error);
  auto status = answer.status;
  auto decoded = json::decode_executor_answer(answer.body);
  if (decoded && decoded->outcome != pb::EXECUTION_OUTCOME_UNSPECIFIED)
    return outcome_of(task, decoded->outcome, decoded->error, decoded->result);
  if (status == 202) return std::nullopt;
  if (status >= 200 && status < 300) {
    if (!decoded)
      return outcome_of(task, pb::OUTCOME_RETRY,
                        "malformed answer: " + error_message(decoded.error()));
    return outcome_of(task, pb::OUTCOME_SUCCEEDED, {}, decoded->result);
  }
  auto snippet = "HTTP " + std::to_string(status) +
                 (answer.body.empty() ? "" : ": " + answer.body.substr(0, 500));
  return outcome_of(task, retryable(status) ? pb::OUTCOME_RETRY : pb::OUTCOME_FAIL, snippet);
}

std::optional<pb::AttemptLog> log_of_failed_answer(const pb::TaskOutcome& outcome,
                                                   const http_answer& answer) {
  constexpr size_t kept_bytes = 64 * 1024;
  if (outcome.outcome() == pb::OUTCOME_SUCCEEDED || answer.body.empty()) return std::nullopt;
  pb::AttemptLog log;
  log.set_attempt(outcome.attempt());
  log.add_lines("the executor answered HTTP " + std::to_string(answer.status) + ":");
  std::string_view body{answer.body};
  body = body.substr(0, kept_bytes);
  while (!body.empty() && log.lines_size() < max_log_lines_per_call) {
    auto end = body.find('\n');
    auto line = body.substr(0, end);
    log.add_lines(text_problem(line) ? quote_input(line, 4096) : std::string{line});
    body = end == std::string_view::npos ? std::string_view{} : body.substr(end + 1);
  }
  return log;
}

}  // namespace taskmill
