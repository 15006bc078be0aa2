#pragma once

// The JSON form of the API messages (SPEC §8). Decoding is strict: unknown
// fields, wrong types and bad values are `invalid_argument` errors naming the
// field; 64-bit integers may be numbers or strings; times are RFC 3339.

#include "taskmill.pb.h"

#include <caf/expected.hpp>

#include <string>
#include <string_view>

namespace taskmill::json {

/// One task object, or {"tasks": [...]}; `batch` tells which form it was.
caf::expected<pb::SubmitTasks> decode_submit(std::string_view body, bool& batch);
caf::expected<pb::RescheduleRequest> decode_reschedule(std::string_view body);
caf::expected<pb::CancelRequest> decode_cancel(std::string_view body);
caf::expected<pb::ResultReport> decode_result_report(std::string_view body);

/// Body of POST /v1/tasks/{id}/progress: {attempt, progress (0 to 1),
/// processed, failed, message}, each but attempt optional (checked by
/// validate in messages/validate.hpp).
caf::expected<pb::Progress> decode_progress(std::string_view body);
caf::expected<pb::AttemptLog> decode_attempt_log(std::string_view body);

/// An executor's JSON answer: {"outcome": ..., "error": ..., "result": ...}
/// overrides the status code's meaning when `outcome` is present. Absent or
/// not an object: nothing to override (the result is the whole body).
struct executor_answer {
  pb::ExecutionOutcome outcome = pb::EXECUTION_OUTCOME_UNSPECIFIED;
  std::string error;
  std::string result;  // JSON text, empty when none
};
caf::expected<executor_answer> decode_executor_answer(std::string_view body);

std::string encode(const pb::Task& task);
std::string encode(const pb::SubmitResults& results, bool batch);
std::string encode(const pb::RescheduleResult& result);
std::string encode(const pb::CancelResult& result);
std::string encode(const pb::TaskList& list);
std::string encode(const pb::AttemptList& list);
std::string encode(const pb::TaskLog& log);
std::string encode(const pb::ResultAck& ack);
std::string encode(const pb::BatchCounts& counts);
std::string encode(const pb::Stats& stats);
std::string encode(const pb::NodeList& nodes);
std::string encode_error(const pb::Error& error);
std::string encode_error(const std::string& code, const std::string& message);

/// PUT /v1/jobs/{name}: a job; a name in the body must be the path's.
caf::expected<pb::Job> decode_job(std::string_view body, const std::string& name);
/// POST /v1/jobs/{name}/trigger: an optional payload; an empty body is none.
caf::expected<pb::TriggerRequest> decode_trigger(std::string_view body);
std::string encode(const pb::Job& job);
std::string encode(const pb::JobPutResult& result);
std::string encode(const pb::JobList& list);
std::string encode(const pb::JobFiring& firing);
std::string encode(const pb::JobFirings& firings);
std::string encode(const pb::FireTimes& times);
/// An alert as its webhook gets it.
std::string encode(const pb::Alert& alert);
/// GET /v1/alerts: each alert with its deliveries.
std::string encode(const pb::AlertList& list);

/// A batch callback's task as taskmill.submit_batch_with_callbacks takes it.
std::string encode_callback(const pb::SubmitTask& callback);

/// The body of the DELETE that cancels a running attempt on an HTTP executor:
/// {"id", "type", "key", "attempt"}.
std::string encode_cancel(int64_t id, const std::string& type, const std::string& key,
                          int32_t attempt);

/// The body an HTTP executor receives (SPEC §4).
std::string encode_execution(const pb::Task& task);

// -- key spaces (SPEC §4 Keyed limits; messages/key_json.cpp) ----------------

/// PUT /v1/key-spaces/{name} (its name, if given, as the body says).
caf::expected<pb::KeySpace> decode_key_space(std::string_view body);
/// GET /v1/key-spaces.
std::string encode(const pb::KeySpaceList& list);
/// A key space with its top keys (GET /v1/key-spaces/{name}).
std::string encode(const pb::KeySpaceState& space);
std::string encode(const pb::KeySpacePutResult& result);
/// GET /v1/key-spaces/{name}/keys/{key}.
std::string encode(const pb::KeyState& key);

// -- workflows (SPEC §10; messages/workflow_json.cpp) ------------------------

/// POST /v1/workflows.
caf::expected<pb::SubmitWorkflow> decode_workflow(std::string_view body);
/// A workflow with its steps and edges (GET /v1/workflows/{id}), or without
/// them (in a list).
std::string encode(const pb::Workflow& workflow);
/// GET /v1/workflows.
std::string encode(const pb::WorkflowList& list);

}  // namespace taskmill::json
