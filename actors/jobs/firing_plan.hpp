#pragma once

// What firing a due job comes to (SPEC §6): the scheduled times that are due
// by now, those fired on time, and those a misfire policy fires late or
// records as missed; and the job's next fire time after now.

#include "node.pb.h"

#include <caf/expected.hpp>

#include <chrono>

namespace taskmill {

struct misfire_rules {
  /// A fire time later than this by now was missed (no leader ran), not
  /// merely late.
  std::chrono::milliseconds threshold{60000};
  /// The most fire times one plan covers; a job missed for longer is planned
  /// from the newest of them.
  int max_times = 1000;
};

/// The plan for `job` at `now_us` (microseconds since the epoch); an error if
/// its stored schedule or time zone no longer parses.
caf::expected<pb::JobPlan> plan_firings(const pb::DueJob& job, int64_t now_us,
                                        const misfire_rules& rules = {});

}  // namespace taskmill
