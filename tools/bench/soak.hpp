#pragma once

// `taskmill bench --soak DURATION`: a node under a steady mixed load for as
// long as asked, sampled every 10 s, judged against stated bounds at the end.

#include <chrono>
#include <string>

namespace taskmill::bench {

struct soak_options {
  std::chrono::milliseconds duration{0};
  /// A server to create a throwaway database on; empty: a private one.
  std::string database;
  std::string binary;
  /// The samples go to <prefix>.csv, their chart to <prefix>.svg.
  std::string prefix = "soak";
};

/// Runs the soak; answers 0 when every bound held, 1 otherwise (or when it
/// could not run).
int run_soak(const soak_options& options);

}  // namespace taskmill::bench
