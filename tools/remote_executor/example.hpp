#pragma once

#include "tools/remote_executor/remote_executor.hpp"

namespace taskmill {

/// `taskmill remote-executor`: an example remote executor. It links to a
/// node's cluster port and runs tasks of the given types, so many at a time:
/// payload "sleep_ms": N takes that long, "fail": true fails the attempt
/// (retried), otherwise it succeeds. It links again, with backoff, when the
/// link drops; it runs until SIGINT or SIGTERM.
int run_remote_executor_example(const remote_executor_options& options);

}  // namespace taskmill
