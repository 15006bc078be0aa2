#pragma once

// The HTTP executors a scenario starts in its own process: each answers tasks
// with a behaviour (latency, failure rate, scripted answers, 202 and a later
// result, hanging, finishing the work but answering late), optionally does
// the business work in SQL, and records every delivery for the assertions.

#include "messages/http.hpp"

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace taskmill {

class http_server;

namespace scenario {

struct executor_behaviour {
  std::string name;
  /// Each answer after a uniform delay in [min, max] ...
  int latency_min_ms = 0;
  int latency_max_ms = 0;
  /// ... or, when p50 is set, a log-normal one with these percentiles: the
  /// long tail real services have.
  double latency_p50_ms = 0;
  double latency_p99_ms = 0;
  /// Answers 500 (a failed attempt, retried) with this probability.
  double failure_rate = 0;
  /// The status of attempt N is answers[N-1]; later attempts get 200.
  std::vector<int> answers;
  /// Answers 202 at once and posts the result after the delay.
  bool async = false;
  /// Never answers, with this probability: the node's timeout ends it.
  double hang_rate = 0;
  /// Does the work, then answers only after late_ms, with this probability.
  double late_rate = 0;
  int late_ms = 0;
  /// The business work, run before a success is answered; {payload},
  /// {parents} (a workflow step's parents' results), {key}, {attempt},
  /// {shard_index} and {shard_total} stand for the task's. The first column
  /// of its first row, if it gives one, is the task's result (JSON). An
  /// error in it is answered 503, a failed attempt.
  std::string work_sql;
};

/// `text` with every `from` replaced by `to`: how placeholders such as {i}
/// are filled in.
std::string replace_all(std::string text, const std::string& from, const std::string& to);

/// How long an executor with behaviour `b` takes over one delivery.
double draw_delay_ms(const executor_behaviour& b, std::mt19937_64& random);

/// One task delivered to an executor.
struct delivery {
  std::string executor;
  int64_t task_id = 0;
  std::string type;
  std::string key;
  int attempt = 0;
  /// Wall clock, microseconds.
  int64_t arrived_us = 0;
  std::string behaviour;
};

class recording_executor {
 public:
  struct job;

  /// `conninfo`: where work_sql runs.
  static std::unique_ptr<recording_executor> start(executor_behaviour behaviour,
                                                   std::string conninfo, std::string& error);
  ~recording_executor();

  const std::string& name() const { return behaviour_.name; }
  std::string url() const;
  /// Where 202 results are posted: a node's API.
  void set_result_api(const std::string& base);
  std::vector<delivery> deliveries() const;
  /// Failures of work_sql, which a scenario reports.
  std::vector<std::string> work_errors() const;
  /// How many cancels of running attempts (DELETEs) it was sent.
  size_t cancels() const;

 private:
  explicit recording_executor(executor_behaviour behaviour, std::string conninfo);
  void on_request(http_request req, http_reply reply);
  void run_jobs();
  void push(std::shared_ptr<job> j);
  std::shared_ptr<job> pop();

  executor_behaviour behaviour_;
  std::unique_ptr<http_server> server_;
  mutable std::mutex mtx_;
  std::condition_variable wake_;
  /// A heap: the next job to do first.
  std::vector<std::shared_ptr<job>> jobs_;
  std::vector<std::shared_ptr<job>> hung_;
  std::vector<delivery> deliveries_;
  std::vector<std::string> work_errors_;
  size_t cancels_ = 0;
  std::string conninfo_;
  std::string result_api_;
  std::mt19937_64 random_;
  std::atomic<bool> stopping_{false};
  std::vector<std::thread> workers_;
};

}  // namespace scenario
}  // namespace taskmill
