#pragma once

// The API's recurring-job endpoints (SPEC §6), for the route table in
// actors/api.cpp.

#include "actors/http/api_call.hpp"

namespace taskmill::api_call {

/// PUT /v1/jobs/{name}: 201 when created, 200 when replaced.
void put_job(self_ptr self, call_ptr c);
/// GET /v1/jobs, GET and DELETE /v1/jobs/{name}.
void list_jobs(self_ptr self, call_ptr c);
void get_job(self_ptr self, call_ptr c);
void delete_job(self_ptr self, call_ptr c);
/// POST /v1/jobs/{name}/trigger|pause|resume.
void trigger_job(self_ptr self, call_ptr c);
void pause_job(self_ptr self, call_ptr c);
void resume_job(self_ptr self, call_ptr c);
/// GET /v1/jobs/{name}/firings?limit= and /v1/jobs/{name}/next?count=.
void job_firings(self_ptr self, call_ptr c);
void next_fire_times(self_ptr self, call_ptr c);

}  // namespace taskmill::api_call
