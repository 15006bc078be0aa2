#pragma once

// The API's workflow endpoints (SPEC §10), for the route table in
// actors/api.cpp.

#include "actors/http/api_call.hpp"

namespace taskmill::api_call {

/// POST /v1/workflows: 201 with the workflow, or 200 with the one of its key.
void submit_workflow(self_ptr self, call_ptr c);
/// GET /v1/workflows?limit=&before=: the newest first, without steps.
void list_workflows(self_ptr self, call_ptr c);
/// GET /v1/workflows/{id}: its steps with their tasks, and its edges.
void get_workflow(self_ptr self, call_ptr c);
/// POST /v1/workflows/{id}/cancel: {"cancelled": n}.
void cancel_workflow(self_ptr self, call_ptr c);
/// POST /v1/workflows/{id}/retry: {"retried": n}.
void retry_workflow(self_ptr self, call_ptr c);

}  // namespace taskmill::api_call
