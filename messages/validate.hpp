#pragma once

// Validation of everything a caller can send (SPEC §9). Errors are
// `invalid_argument` (or `payload_too_large`) and name the field, prefixed
// with where it sits ("tasks[3].priority ...").

#include "taskmill.pb.h"

#include <caf/error.hpp>

#include <string>
#include <string_view>

namespace taskmill {

/// How deep a payload or result may nest (objects and arrays in each other).
/// PostgreSQL and the parsers' stacks take thousands of levels; real payloads
/// take a handful.
inline constexpr int max_json_depth = 64;
/// The levels a request body puts around a payload: {"tasks": [{"payload": ...}]}.
inline constexpr int max_envelope_depth = 3;
/// The most tasks one submit request may carry.
inline constexpr int max_batch_size = 10000;
/// The most steps one workflow may have (taskmill.submit_workflow says the
/// same of its tasks, shards included).
inline constexpr int max_workflow_steps = 10000;

struct input_limits {
  int64_t max_payload_bytes = 1 << 20;
};

caf::error validate(const pb::SubmitTask& task, const input_limits& limits,
                    const std::string& where = "");
caf::error validate(const pb::SubmitTasks& tasks, const input_limits& limits);
/// Whether a batch carries callbacks (on_finish, on_success).
bool has_callbacks(const pb::SubmitTasks& tasks);
caf::error validate(const pb::SubmitWorkflow& workflow, const input_limits& limits);
caf::error validate(const pb::RescheduleRequest& req, const input_limits& limits);
caf::error validate(const pb::CancelRequest& req);
caf::error validate(const pb::ResultReport& report, const input_limits& limits);

/// A progress message is bounded: it says what a task does now, not a log.
inline constexpr size_t max_progress_message_bytes = 1000;

/// POST /v1/tasks/{id}/progress: attempt 1 or more, progress 0 to 1, failed
/// at most processed, a bounded message.
caf::error validate(const pb::Progress& report);

/// Lines one call may log; the database keeps each attempt's last 1,000
/// (storage/sql/logs.sql).
inline constexpr int max_log_lines_per_call = 1000;

/// POST /v1/tasks/{id}/logs: attempt 1 or more, 1 to 1,000 lines of text.
caf::error validate(const pb::AttemptLog& log);
caf::error validate(const pb::Job& job, const input_limits& limits);
caf::error validate(const pb::TriggerRequest& req, const input_limits& limits);

}  // namespace taskmill
