#pragma once

// The built-in executors, for demos, tests and the bench: noop succeeds at
// once, fail fails at once, sleep succeeds after the time its payload names.

#include "config/config.hpp"
#include "node.pb.h"

#include <chrono>

namespace taskmill {

/// The outcome of a noop or fail execution, known at once. A noop whose
/// payload is {"report_start": true} succeeds with {"started_at_us": N}, when
/// it ran in microseconds since the epoch by the node's clock: the bench times
/// a pickup to an in-process executor by it.
pb::TaskOutcome instant_outcome(executor_kind kind, const pb::Task& task);

/// How long a sleep execution takes: the payload is a number of
/// milliseconds, or an object with "ms".
std::chrono::milliseconds sleep_time(const pb::Task& task);

}  // namespace taskmill
