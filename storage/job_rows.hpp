#pragma once

// Converting between the messages of recurring jobs and statement rows and
// parameters.

#include "node.pb.h"
#include "storage/pg.hpp"

namespace taskmill::db {

/// The parameters of put_job for `job` (its next fire time and anchor set).
std::vector<param> job_params(const pb::Job& job);

/// A job row (a `created` column first, then the columns of taskmill.jobs).
void read_job(const result& res, int row, pb::Job* out);

pb::JobFirings read_firings(const result& res, const std::string& job);

pb::JobMetrics read_job_metrics(const result& res);

/// fire_jobs' rows and, if it could be read, next_job_due (if not, the next
/// job counts as due now: the cron actor looks again).
pb::FiringRound read_firing_round(const result& fired, const caf::expected<result>& next_due);

pb::DueJobs read_due_jobs(const result& due, const result& next_due);

/// The parameters of fire_jobs: one row per firing, and one without a fire
/// time for a plan that only moves its job's next fire time.
std::vector<param> fire_params(const pb::JobPlans& plans);

param micros_param(int64_t micros);

}  // namespace taskmill::db
