#pragma once

// Callers refused on the cluster port are logged once per interval for each
// address and reason, not once per attempt: a misconfigured host that retries
// every second (or anyone who knocks) would otherwise fill the log.

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

namespace taskmill {

class refusal_log {
 public:
  using clock = std::chrono::steady_clock;

  /// At most `max_sources` (address, reason) pairs are remembered; past
  /// that, refusals from addresses not remembered share one entry.
  explicit refusal_log(clock::duration interval, size_t max_sources = 1024);

  /// A refusal of `address` for `reason` at `now`. Answers, when a line is
  /// due, how many refusals of that pair went unlogged since the last line
  /// (0 for the first); nothing otherwise. Thread-safe.
  std::optional<int64_t> record(const std::string& address, const std::string& reason,
                                clock::time_point now);

  clock::duration interval() const { return interval_; }

 private:
  struct source {
    clock::time_point logged;
    int64_t unlogged = 0;
  };

  clock::duration interval_;
  size_t max_sources_;
  std::mutex mutex_;
  std::map<std::pair<std::string, std::string>, source> sources_;
};

}  // namespace taskmill
