// The requests of recurring jobs (SPEC §6).

#include "storage/storage_internal.hpp"

#include "messages/errors.hpp"
#include "messages/time.hpp"
#include "storage/job_rows.hpp"

namespace taskmill::storage_internal {

caf::expected<pb::Job> single_job(const db::result& res, const std::string& name) {
  if (res.rows() == 0) return make_error(errc::not_found, "no job " + name);
  pb::Job job;
  db::read_job(res, 0, &job);
  return job;
}

caf::result<pb::JobPutResult> put_job(self_ptr self, const pb::Job& job) {
  return ask_db<pb::JobPutResult>(self, {db::call{&db::sql::put_job, db::job_params(job)}},
                                  [](results& rs) -> caf::expected<pb::JobPutResult> {
                                    pb::JobPutResult out;
                                    out.set_created(rs[0]->boolean(0, 0));
                                    db::read_job(*rs[0], 0, out.mutable_job());
                                    return out;
                                  });
}

caf::result<std::string> put_job_problem(self_ptr self, const pb::Job& job) {
  return ask_db<std::string>(self, {db::call{&db::sql::put_job_problem, db::job_params(job)}},
                             [](results& rs) { return rs[0]->string(0, 0); });
}

caf::result<pb::Job> get_job(self_ptr self, const std::string& name) {
  return ask_db<pb::Job>(self, {db::call{&db::sql::get_job, {name}}},
                         [name](results& rs) { return single_job(*rs[0], name); });
}

caf::result<pb::JobList> list_jobs(self_ptr self) {
  return ask_db<pb::JobList>(self, {db::call{&db::sql::list_jobs, {}}},
                             [](results& rs) -> caf::expected<pb::JobList> {
                               pb::JobList out;
                               for (int row = 0; row < rs[0]->rows(); ++row)
                                 db::read_job(*rs[0], row, out.add_jobs());
                               return out;
                             });
}

caf::result<bool> delete_job(self_ptr self, const std::string& name) {
  return ask_db<bool>(self, {db::call{&db::sql::delete_job, {name}}},
                      [](results& rs) -> caf::expected<bool> { return rs[0]->boolean(0, 0); });
}

caf::result<pb::Job> set_job_enabled(self_ptr self, const std::string& name, bool enabled,
                                     int64_t next_us) {
  db::call c{&db::sql::set_job_enabled,
             {name, enabled ? "true" : "false", db::micros_param(next_us)}};
  return ask_db<pb::Job>(self, {std::move(c)},
                         [name](results& rs) { return single_job(*rs[0], name); });
}

caf::result<pb::JobFiring> trigger_job(self_ptr self, const std::string& name,
                                       const std::string& payload, int64_t lease_ms) {
  db::call c{&db::sql::trigger_job,
             {name, payload.empty() ? db::param{} : db::param{payload}, std::to_string(lease_ms)}};
  return ask_db<pb::JobFiring>(self, {std::move(c)},
                               [name](results& rs) -> caf::expected<pb::JobFiring> {
                                 pb::JobFiring out;
                                 out.set_job(name);
                                 set_micros(out.mutable_fire_at(), rs[0]->micros(0, 0));
                                 out.set_kind("manual");
                                 out.set_outcome(rs[0]->string(0, 1));
                                 out.set_batch(rs[0]->string(0, 2));
                                 return out;
                               });
}

caf::result<pb::JobFirings> job_firings(self_ptr self, const std::string& name, int32_t limit) {
  return ask_db<pb::JobFirings>(self,
                                {db::call{&db::sql::job_firings, {name, std::to_string(limit)}}},
                                [name](results& rs) { return db::read_firings(*rs[0], name); });
}

caf::result<pb::JobMetrics> job_metrics(self_ptr self) {
  return ask_db<pb::JobMetrics>(self, {db::call{&db::sql::job_metrics, {}}},
                                [](results& rs) { return db::read_job_metrics(*rs[0]); });
}

caf::result<pb::DueJobs> due_jobs(self_ptr self, int32_t limit) {
  return ask_db<pb::DueJobs>(
      self,
      {db::call{&db::sql::due_jobs, {std::to_string(limit)}}, db::call{&db::sql::next_job_due, {}}},
      [](results& rs) { return db::read_due_jobs(*rs[0], *rs[1]); });
}

/// The firings and, in the same round trip, when the next job is due after
/// them, so that the cron actor need not ask again.
caf::result<pb::FiringRound> fire_jobs(self_ptr self, const pb::JobPlans& plans) {
  return ask_db<pb::FiringRound>(
      self,
      {db::call{&db::sql::fire_jobs, db::fire_params(plans)}, db::call{&db::sql::next_job_due, {}}},
      [](results& rs) { return db::read_firing_round(*rs[0], rs[1]); }, 1);
}

}  // namespace taskmill::storage_internal
