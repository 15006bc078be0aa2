#pragma once

// When a job fires, as the API and a node's [[jobs]] put it and as the API
// previews it.

#include "messages/schedule.hpp"
#include "taskmill.pb.h"

#include <caf/error.hpp>
#include <caf/expected.hpp>

#include <vector>

namespace taskmill {

/// Checks `job`'s schedule and time zone (an error names the field and the
/// token), writes the zone's name as the library knows it ("UTC" for none),
/// and sets when the job fires next after `now`, an @every rate starting at
/// `now`. A schedule that never fires again is refused.
caf::error schedule_job(pb::Job& job, cron::seconds_time now);

/// The next `count` fire times of a stored job after `now`.
caf::expected<std::vector<cron::seconds_time>> upcoming_fire_times(const pb::Job& job,
                                                                   cron::seconds_time now,
                                                                   int count);

cron::seconds_time seconds_now();

}  // namespace taskmill
