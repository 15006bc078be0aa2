#include "messages/validate.hpp"

#include "messages/errors.hpp"
#include "messages/json_parse.hpp"
#include "messages/text.hpp"
#include "messages/time.hpp"

#include <sstream>

namespace taskmill {

namespace {

caf::error bad(const std::string& where, const std::string& field, const std::string& what) {
  return make_error(errc::invalid_argument, where + field + " " + what);
}

caf::error check_text(const std::string& text, const std::string& where, const std::string& field) {
  if (auto problem = text_problem(text)) return bad(where, field, problem);
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

/// Whether PostgreSQL can take the time at all; its range is a rule of
/// taskmill.task_problem.
caf::error check_time(const google::protobuf::Timestamp& ts, const std::string& where,
                      const std::string& field) {
  if (ts.seconds() < first_time_seconds || ts.seconds() > last_time_seconds || ts.nanos() < 0 ||
      ts.nanos() > 999'999'999)
    return bad(where, field, "must be a time between years 1 and 9999");
  return caf::none;
}

}  // namespace

// The rules on the values of a task's fields live in SQL
// (taskmill.task_problem in storage/sql/submit.sql), so that the API and a
// business transaction accept and refuse the same, in the same words. Here is
// only what SQL cannot see: text PostgreSQL cannot hold, and the node's own
// bounds on payloads.
caf::error validate(const pb::SubmitTask& t, const input_limits& limits, const std::string& where) {
  if (auto err = check_text(t.type(), where, "type")) return err;
  if (auto err = check_text(t.key(), where, "key")) return err;
  if (t.has_batch())
    if (auto err = check_text(t.batch(), where, "batch")) return err;
  if (t.has_trace_id())
    if (auto err = check_text(t.trace_id(), where, "trace_id")) return err;
  if (t.has_concurrency_key())
    if (auto err = check_text(t.concurrency_key(), where, "concurrency_key")) return err;
  if (t.has_payload())
    if (auto err = check_json(t.payload(), limits, where, "payload")) return err;
  if (t.has_after())
    if (auto err = check_json(t.after(), limits, where, "after")) return err;
  if (t.has_execute_at())
    if (auto err = check_time(t.execute_at(), where, "execute_at")) return err;
  return caf::none;
}

namespace {

caf::error validate_callback(const pb::SubmitTask& callback, const input_limits& limits,
                             const std::string& where) {
  // Without a key the batch names it ("<batch>:on_finish").
  if (!callback.key().empty()) return validate(callback, limits, where);
  auto named = callback;
  named.set_key(where);
  return validate(named, limits, where);
}

}  // namespace

caf::error validate(const pb::SubmitTasks& tasks, const input_limits& limits) {
  if (tasks.tasks_size() == 0) return bad("", "tasks", "must not be empty");
  if (tasks.tasks_size() > max_batch_size)
    return bad("", "tasks", "must hold at most " + std::to_string(max_batch_size) + " tasks");
  for (int i = 0; i < tasks.tasks_size(); ++i) {
    auto where = tasks.tasks_size() == 1 && !has_callbacks(tasks)
                     ? std::string{}
                     : "tasks[" + std::to_string(i) + "].";
    if (auto err = validate(tasks.tasks(i), limits, where)) return err;
  }
  if (tasks.has_on_finish())
    if (auto err = validate_callback(tasks.on_finish(), limits, "on_finish.")) return err;
  if (tasks.has_on_success())
    if (auto err = validate_callback(tasks.on_success(), limits, "on_success.")) return err;
  return caf::none;
}

bool has_callbacks(const pb::SubmitTasks& tasks) {
  return tasks.has_on_finish() || tasks.has_on_success();
}

caf::error validate(const pb::SubmitWorkflow& workflow, const input_limits& limits) {
  if (auto err = check_text(workflow.name(), "", "name")) return err;
  if (workflow.has_key())
    if (auto err = check_text(workflow.key(), "", "key")) return err;
  if (workflow.steps_size() == 0 || workflow.steps_size() > max_workflow_steps)
    return bad("", "steps", "must hold 1 to " + std::to_string(max_workflow_steps) + " steps");
  for (int i = 0; i < workflow.steps_size(); ++i) {
    auto where = "steps[" + std::to_string(i) + "].";
    const auto& step = workflow.steps(i);
    if (auto err = check_text(step.name(), where, "name")) return err;
    if (step.task().key().empty()) {
      // The workflow names the step's task ("<id>/<name>").
      auto named = step.task();
      named.set_key(step.name());
      if (auto err = validate(named, limits, where)) return err;
    } else if (auto err = validate(step.task(), limits, where)) {
      return err;
    }
  }
  return caf::none;
}

caf::error validate(const pb::RescheduleRequest& req, const input_limits& limits) {
  if (auto err = check_text(req.type(), "", "type")) return err;
  if (auto err = check_text(req.key(), "", "key")) return err;
  if (req.has_execute_at())
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
  if (auto err = check_text(req.type(), "", "type")) return err;
  return check_text(req.key(), "", "key");
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

caf::error validate(const pb::Progress& report) {
  if (report.attempt() < 1) return bad("", "attempt", "is required (1 or more)");
  if (report.has_progress() && !(report.progress() >= 0 && report.progress() <= 1)) {
    std::ostringstream got;
    got << report.progress();
    return bad("", "progress", "must be between 0 and 1 (got " + got.str() + ")");
  }
  if (report.processed() < 0) return bad("", "processed", "must be 0 or more");
  if (report.failed() < 0) return bad("", "failed", "must be 0 or more");
  if (report.has_deadline_in_ms() &&
      (report.deadline_in_ms() < 1 || report.deadline_in_ms() > INT32_MAX))
    return bad("", "deadline_in_ms", "must be between 1 and " + std::to_string(INT32_MAX));
  if (report.has_failed() && report.has_processed() && report.failed() > report.processed())
    return bad("", "failed",
               "must be at most processed (" + std::to_string(report.processed()) + ")");
  if (report.message().size() > max_progress_message_bytes)
    return bad("", "message",
               "must be at most " + std::to_string(max_progress_message_bytes) + " bytes");
  return check_text(report.message(), "", "message");
}

caf::error validate(const pb::AttemptLog& log) {
  if (log.attempt() < 1) return bad("", "attempt", "is required (1 or more)");
  if (log.lines_size() < 1 || log.lines_size() > max_log_lines_per_call)
    return bad("", "lines",
               "must hold 1 to " + std::to_string(max_log_lines_per_call) + " lines (got " +
                   std::to_string(log.lines_size()) + ")");
  for (int i = 0; i < log.lines_size(); ++i)
    if (auto err = check_text(log.lines(i), "", "lines[" + std::to_string(i) + "]")) return err;
  return caf::none;
}

caf::error validate(const pb::Job& job, const input_limits& limits) {
  for (const auto& [field, text] : {std::pair{"schedule", &job.schedule()},
                                    {"dialect", &job.dialect()},
                                    {"time_zone", &job.time_zone()},
                                    {"type", &job.type()},
                                    {"routing", &job.routing()},
                                    {"overlap", &job.overlap()},
                                    {"misfire", &job.misfire()},
                                    {"description", &job.description()}})
    if (auto err = check_text(*text, "", field)) return err;
  if (job.has_payload())
    if (auto err = check_json(job.payload(), limits, "", "payload")) return err;
  return caf::none;
}

caf::error validate(const pb::TriggerRequest& req, const input_limits& limits) {
  if (req.has_payload())
    if (auto err = check_json(req.payload(), limits, "", "payload")) return err;
  return caf::none;
}

}  // namespace taskmill
