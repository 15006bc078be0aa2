#pragma once

// The API's task and batch endpoints (SPEC §3, §8), for the route table in
// actors/api.cpp.

#include "actors/http/api_call.hpp"

namespace taskmill::api_call {

/// POST /v1/tasks (one task or {"tasks": [...]}), /v1/tasks/reschedule,
/// /v1/tasks/cancel.
void submit(self_ptr self, call_ptr c);
void reschedule(self_ptr self, call_ptr c);
void cancel(self_ptr self, call_ptr c);
/// GET /v1/tasks?type=&key=&status=&batch=&limit=&page_token=.
void list(self_ptr self, call_ptr c);
/// GET /v1/tasks/{id} (with why it is not running), /v1/tasks/{id}/attempts.
void get_task(self_ptr self, call_ptr c);
void task_attempts(self_ptr self, call_ptr c);
/// POST /v1/tasks/{id}/result|progress|logs (fenced by attempt).
void task_result(self_ptr self, call_ptr c);
void task_progress(self_ptr self, call_ptr c);
void task_log(self_ptr self, call_ptr c);
/// GET /v1/tasks/{id}/logs?after=&limit=.
void read_task_log(self_ptr self, call_ptr c);
/// POST /v1/tasks/{id}/retry.
void retry_task(self_ptr self, call_ptr c);
/// GET /v1/batches/{batch}, POST /v1/batches/{batch}/retry-failed.
void get_batch(self_ptr self, call_ptr c);
void retry_batch(self_ptr self, call_ptr c);

}  // namespace taskmill::api_call
