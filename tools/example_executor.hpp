#pragma once

#include <cstdint>
#include <string>

namespace taskmill {

/// `taskmill example-executor`: an HTTP executor to try taskmill with. It
/// answers POST /work following the task's payload: "fail_attempts": N fails
/// the first N attempts with 503, "sleep_ms": N takes that long, "async": true
/// answers 202 and posts the result to `callback` (the node's API) later;
/// otherwise it succeeds with a small result. Runs until SIGINT or SIGTERM.
int run_example_executor(const std::string& host, uint16_t port, const std::string& callback);

}  // namespace taskmill
