#pragma once

// The bench's pickup latencies (SPEC §8): tasks submitted at a steady rate,
// each timed to its start at an HTTP executor, at the built-in one, as
// plain SQL, and through a wake-up another node sends over CAF.

#include "tools/bench/harness.hpp"

#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace taskmill::bench {

/// Run by the node's HTTP executor (the bench's own server).
inline constexpr const char* latency_type = "BENCH_LATENCY";
/// Run by the built-in noop executor: the in-process pickup latency.
inline constexpr const char* inproc_type = "BENCH_INPROC";
/// Run only by the second of the two wake-up nodes.
inline constexpr const char* wakeup_type = "BENCH_WAKEUP";

/// How fast and how long the latency measurements submit.
struct pace {
  double seconds;
  int rate;  // tasks/s
};

/// Records when the HTTP executor's handler starts on each task, by key.
class arrivals {
 public:
  void record(const std::string& key, steady::time_point at) {
    std::lock_guard<std::mutex> lock{guard_};
    at_.emplace(key, at);
  }
  std::optional<steady::time_point> find(const std::string& key) {
    std::lock_guard<std::mutex> lock{guard_};
    auto it = at_.find(key);
    if (it == at_.end()) return std::nullopt;
    return it->second;
  }
  size_t size() {
    std::lock_guard<std::mutex> lock{guard_};
    return at_.size();
  }
  void clear() {
    std::lock_guard<std::mutex> lock{guard_};
    at_.clear();
  }

 private:
  std::mutex guard_;
  std::unordered_map<std::string, steady::time_point> at_;
};

struct latency_run {
  double p50, p95, p99, max;
};

/// The percentiles of `ms`, times in ms.
latency_run summary(std::vector<double> ms);

/// Submits through taskmill.submit (one autocommit statement each, as a
/// business service would) at a steady rate and times, for each task, the
/// return of its commit to its arrival at the HTTP executor.
latency_run pickup_latency(db::connection& conn, arrivals& seen, const pace& p, int run_index);

/// The same paced submits for a type the built-in noop executor runs, timed
/// from the return of each commit to the executor's start, on an emptied
/// tasks table.
latency_run inproc_pickup_latency(db::connection& conn, const pace& p, int run_index);

/// The same measurement's times, ms, one a task in no order: to be pooled
/// with others' before their summary. The table keeps what it holds but
/// the measurement's own tasks.
std::vector<double> inproc_pickup_times(db::connection& conn, const pace& p, int run_index);

/// The pickup as plain SQL, the floor of the node's (jobs inserted with a
/// NOTIFY, claimed by a listener at each burst of notifications).
latency_run raw_pickup_latency(const std::string& conninfo, const pace& p);

/// The pickup through a wake-up sent over CAF, between two nodes that
/// neither LISTEN nor poll; tasks of wakeup_type go to `executor_url`.
latency_run cluster_wakeup(const std::string& binary, db::connection& conn,
                           const std::string& conninfo, const std::string& executor_url,
                           arrivals& seen, const pace& p, int run_index);

}  // namespace taskmill::bench
