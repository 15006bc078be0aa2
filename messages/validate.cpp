#include "messages/validate.hpp"

#include "messages/errors.hpp"
#include "messages/json_parse.hpp"
#include "messages/text.hpp"
#include "messages/time.hpp"

namespace taskmill {

namespace {

caf::error bad(const std::string& where, const std::string& field, const std::string& what) {
  return make_error(errc::invalid_argument, where + field + " " + what);
}

caf::error check_text(const std::string& text, const std::string& where, const std::string& field) {
  if (auto problem = text_problem(text)) return bad(where, field, problem);
  return caf::none;
}

caf::error check_unit(const std::string& type, const std::string& key, const std::string& where) {
  if (auto err = check_text(type, where, "type")) return err;
  if (auto err = check_text(key, where, "key")) return err;
  if (type.empty()) return bad(where, "type", "is required");
  if (type.size() > 200) return bad(where, "type", "must be at most 200 characters");
  if (key.empty()) return bad(where, "key", "is required");
  if (key.size() > 500) return bad(where, "key", "must be at most 500 characters");
  return caf::none;
}

caf::error check_json(const std::string& text, const input_limits& limits, const std::string& where,
                      const std::string& field) {
  if (static_cast<int64_t>(text.size()) > limits.max_payload_bytes)
    return make_error(errc::payload_too_large, where + field + " is " +
                                                   std::to_string(text.size()) +
                                                   " bytes, more than the limit of " +
                                                   std::to_string(limits.max_payload_bytes));
  return json::check_bounded(text, where + field, max_json_depth);
}

caf::error check_time(const google::protobuf::Timestamp& ts, const std::string& where,
                      const std::string& field) {
  if (ts.seconds() < first_time_seconds || ts.seconds() > last_time_seconds || ts.nanos() < 0 ||
      ts.nanos() > 999'999'999)
    return bad(where, field, "must be a time between years 1 and 9999");
  return caf::none;
}

bool is_trace_id(const std::string& id) {
  if (id.size() != 32 || id == std::string(32, '0')) return false;
  for (char c : id)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

}  // namespace

caf::error validate(const pb::SubmitTask& t, const input_limits& limits, const std::string& where) {
  if (auto err = check_unit(t.type(), t.key(), where)) return err;
  if (t.has_version() && t.version() < 0) return bad(where, "version", "must be 0 or more");
  if (t.has_payload())
    if (auto err = check_json(t.payload(), limits, where, "payload")) return err;
  if (t.has_execute_at())
    if (auto err = check_time(t.execute_at(), where, "execute_at")) return err;
  if (t.has_priority() && (t.priority() < 1 || t.priority() > 5))
    return bad(where, "priority",
               "must be between 1 and 5 (got " + std::to_string(t.priority()) + ")");
  if (t.has_max_retries() && (t.max_retries() < 0 || t.max_retries() > 1000))
    return bad(where, "max_retries", "must be between 0 and 1000");
  if (t.has_timeout_ms() && (t.timeout_ms() < 1 || t.timeout_ms() > max_timeout_ms))
    return bad(where, "timeout_ms", "must be between 1 and " + std::to_string(max_timeout_ms));
  if (t.has_backoff()) {
    const auto& b = t.backoff();
    if (b.base_ms() < 0) return bad(where, "backoff.base_ms", "must be positive");
    if (b.cap_ms() < 0) return bad(where, "backoff.cap_ms", "must be positive");
    if (!(b.jitter() >= 0 && b.jitter() <= 1))
      return bad(where, "backoff.jitter", "must be between 0 and 1");
  }
  if (t.has_batch())
    if (auto err = check_text(t.batch(), where, "batch")) return err;
  if (t.has_batch() && (t.batch().empty() || t.batch().size() > 200))
    return bad(where, "batch", "must be 1 to 200 characters");
  if (t.has_trace_id() && !is_trace_id(t.trace_id()))
    return bad(where, "trace_id", "must be 32 lowercase hex digits, not all zero (W3C trace-id)");
  if (t.has_shard_index() != t.has_shard_total())
    return bad(where, "shard_index", "and shard_total go together");
  if (t.has_shard_total() && (t.shard_total() < 1 || t.shard_total() > 10000))
    return bad(where, "shard_total", "must be between 1 and 10000");
  if (t.has_shard_index() && (t.shard_index() < 0 || t.shard_index() >= t.shard_total()))
    return bad(where, "shard_index", "must be at least 0 and less than shard_total");
  return caf::none;
}

caf::error validate(const pb::SubmitTasks& tasks, const input_limits& limits) {
  if (tasks.tasks_size() == 0) return bad("", "tasks", "must not be empty");
  if (tasks.tasks_size() > max_batch_size)
    return bad("", "tasks", "must hold at most " + std::to_string(max_batch_size) + " tasks");
  for (int i = 0; i < tasks.tasks_size(); ++i) {
    auto where = tasks.tasks_size() == 1 ? std::string{} : "tasks[" + std::to_string(i) + "].";
    if (auto err = validate(tasks.tasks(i), limits, where)) return err;
  }
  return caf::none;
}

caf::error validate(const pb::RescheduleRequest& req, const input_limits& limits) {
  if (auto err = check_unit(req.type(), req.key(), "")) return err;
  if (!req.has_execute_at()) return bad("", "execute_at", "is required");
  if (auto err = check_time(req.execute_at(), "", "execute_at")) return err;
  if (req.has_payload())
    if (auto err = check_json(req.payload(), limits, "", "payload")) return err;
  return caf::none;
}

caf::error validate(const pb::CancelRequest& req) {
  if (req.id() < 0) return bad("", "id", "must be positive");
  if (req.id() > 0) {
    if (!req.type().empty() || !req.key().empty())
      return bad("", "id", "or type and key: not both");
    return caf::none;
  }
  if (req.type().empty() && req.key().empty()) return bad("", "id", "or type and key is required");
  return check_unit(req.type(), req.key(), "");
}

caf::error validate(const pb::ResultReport& report, const input_limits& limits) {
  if (report.attempt() < 1) return bad("", "attempt", "must be 1 or more");
  if (report.outcome() == pb::EXECUTION_OUTCOME_UNSPECIFIED)
    return bad("", "outcome", "is required: succeeded, retry or fail");
  if (auto err = check_text(report.error(), "", "error")) return err;
  if (!report.result().empty())
    if (auto err = check_json(report.result(), limits, "", "result")) return err;
  return caf::none;
}

}  // namespace taskmill
