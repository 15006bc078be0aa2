#include "actors/http/job_endpoints.hpp"

#include "actors/jobs/job_times.hpp"
#include "messages/names.hpp"
#include "messages/time.hpp"
#include "messages/validate.hpp"

namespace taskmill::api_call {

// -- recurring jobs (SPEC §6) --------------------------------------------------------

void put_job(self_ptr self, call_ptr c) {
  const auto& o = self->state.options;
  const auto& name = c->path[2];
  auto job = c->protobuf_in ? decode_protobuf<pb::Job>(*c) : json::decode_job(c->req.body, name);
  if (!job) return fail(self, *c, job.error());
  job->set_name(name);
  job->set_source("api");
  if (auto err = validate(*job, input_limits{o.cfg->api.max_payload_bytes}))
    return fail(self, *c, err);
  if (auto err = schedule_job(*job, seconds_now())) return fail(self, *c, err);
  ask<pb::JobPutResult>(
      self, c, o.jobs,
      [self](const call& c, const pb::JobPutResult& r) {
        answer(
            self, c, r, [](const pb::JobPutResult& m) { return json::encode(m); },
            r.created() ? 201 : 200);
      },
      job_atom_v, std::move(*job));
}

/// Answers a call with the job storage gave.
static auto job_answer(self_ptr self) {
  return [self](const call& c, const pb::Job& job) { answer(self, c, job); };
}

/// Asks for the job, then `done` with it.
template <class Done>
void with_job(self_ptr self, call_ptr c, const std::string& name, Done&& done) {
  ask<pb::Job>(self, c, self->state.options.jobs, std::forward<Done>(done), job_atom_v, name);
}

void resume_job(self_ptr self, call_ptr c) {
  const auto& name = c->path[2];
  with_job(self, c, name, [self, c, name](const call&, const pb::Job& job) {
    auto next = upcoming_fire_times(job, seconds_now(), 1);
    if (!next) return fail(self, *c, next.error());
    if (next->empty())
      return fail(self, *c, make_error(errc::conflict, "job " + name + " never fires again"));
    auto micros =
        std::chrono::duration_cast<std::chrono::microseconds>(next->front().time_since_epoch())
            .count();
    ask<pb::Job>(self, c, self->state.options.jobs, job_answer(self), enable_atom_v, name, true,
                 static_cast<int64_t>(micros));
  });
}

void next_fire_times(self_ptr self, call_ptr c) {
  auto count = count_parameter(*c, "count", 5, 100);
  if (!count) return fail(self, *c, count.error());
  with_job(self, c, c->path[2], [self, c, n = *count](const call&, const pb::Job& job) {
    auto times = upcoming_fire_times(job, seconds_now(), n);
    if (!times) return fail(self, *c, times.error());
    pb::FireTimes out;
    out.set_paused(!job.enabled());
    for (auto t : *times)
      set_micros(
          out.add_times(),
          std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count());
    answer(self, *c, out);
  });
}

void trigger_job(self_ptr self, call_ptr c) {
  const auto& o = self->state.options;
  const auto& name = c->path[2];
  auto req =
      c->protobuf_in ? decode_protobuf<pb::TriggerRequest>(*c) : json::decode_trigger(c->req.body);
  if (!req) return fail(self, *c, req.error());
  if (auto err = validate(*req, input_limits{o.cfg->api.max_payload_bytes}))
    return fail(self, *c, err);
  ask<pb::JobFiring>(
      self, c, o.jobs,
      [self](const call& c, const pb::JobFiring& f) {
        self->send(self->state.options.pusher, wake_atom_v);
        answer(
            self, c, f, [](const pb::JobFiring& m) { return json::encode(m); }, 201);
      },
      trigger_atom_v, name, req->has_payload() ? req->payload() : std::string{},
      static_cast<int64_t>(o.lease.count()));
}

void list_jobs(self_ptr self, call_ptr c) {
  ask<pb::JobList>(
      self, c, self->state.options.jobs,
      [self](const call& c, const pb::JobList& l) { answer(self, c, l); }, jobs_atom_v);
}

void get_job(self_ptr self, call_ptr c) {
  with_job(self, c, c->path[2], job_answer(self));
}

void delete_job(self_ptr self, call_ptr c) {
  const auto& name = c->path[2];
  ask<bool>(
      self, c, self->state.options.jobs,
      [self, name](const call& c, bool deleted) {
        if (!deleted) return fail(self, c, make_error(errc::not_found, "no job " + name));
        send(self, c, http_response{200, "application/json", R"({"deleted":true})"});
      },
      drop_atom_v, name);
}

void pause_job(self_ptr self, call_ptr c) {
  ask<pb::Job>(self, c, self->state.options.jobs, job_answer(self), enable_atom_v, c->path[2],
               false, int64_t{0});
}

void job_firings(self_ptr self, call_ptr c) {
  auto limit = count_parameter(*c, "limit", 50, 1000);
  if (!limit) return fail(self, *c, limit.error());
  ask<pb::JobFirings>(
      self, c, self->state.options.jobs,
      [self](const call& c, const pb::JobFirings& f) { answer(self, c, f); }, firings_atom_v,
      c->path[2], *limit);
}

}  // namespace taskmill::api_call
