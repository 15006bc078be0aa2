#pragma once

// `taskmill scenario FILE...`: scripted scenarios (TOML) against real
// processes. A file names recording HTTP executors, nodes with their config
// overrides, and steps run in order: start/stop/kill nodes, stop/crash
// PostgreSQL, submit/reschedule/cancel, SQL as a business service runs it,
// chaos (nodes killed at random), waits with a bound, and assertions. The
// format is in README.md ("Scenarios") and tests/scenarios/ has examples.

#include "tools/scenario/recording_executor.hpp"

#include <caf/expected.hpp>

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace taskmill::scenario {

using std::chrono::milliseconds;

struct node_spec {
  std::string name;
  std::vector<std::string> set;
};

/// Task fields for submit, reschedule and cancel; strings may hold {i}.
struct task_template {
  std::string type;
  std::string key;
  std::optional<std::string> payload;
  std::optional<std::string> execute_at;
  /// Further fields of the API's task, as JSON values.
  std::map<std::string, std::string> json_fields;
};

struct count_check {
  std::optional<std::string> status;
  std::optional<std::string> type;
  std::optional<int64_t> equals, at_least, at_most;
};

struct latency_check {
  std::string executor;
  double percentile = 99;
  double at_most_ms = 0;
};

/// One step; which fields count depends on `kind`.
/// In the nodes of a cut or freeze step: the node that leads when it runs.
inline constexpr const char* leader_node = "{leader}";

struct step {
  std::string kind;
  int line = 0;
  std::vector<std::string> nodes;
  std::vector<std::string> set;
  std::string node;  // whose API
  std::string sql;
  std::string equals = "t";
  /// For sql in wait and assert: the answer as a number, within bounds
  /// (instead of equals).
  std::optional<double> at_least, at_most;
  int64_t repeat = 1;
  int64_t count = 1;
  int64_t batch = 1;
  task_template task;
  std::string action;  // postgres: stop, crash, start, restart
  bool hard = false;   // restart with SIGKILL
  // cut: from PostgreSQL, from the other nodes (cluster links), or both
  bool cut_postgres = true;
  bool cut_peers = true;
  milliseconds duration{0};
  milliseconds every{0};
  milliseconds down_for{0};
  milliseconds timeout{60000};
  // api
  std::string method, path, body;
  /// Empty: any 2xx.
  std::optional<int> expect_status;
  // wait and assert
  std::optional<count_check> tasks;
  std::optional<int64_t> deliveries;
  std::optional<latency_check> latency;
  std::optional<std::pair<std::string, int64_t>> alerts;  // kind ("" any), at least
  bool no_duplicate_deliveries = false;
  bool every_task_ran = false;
  std::optional<std::string> every_task_ran_type;
  std::optional<milliseconds> recovered_within;
};

struct scenario {
  std::string file;
  std::string name;
  std::string description;
  std::vector<executor_behaviour> executors;
  std::vector<node_spec> nodes;
  std::vector<step> steps;
};

/// Reads and checks a scenario file: unknown keys and bad values are errors
/// naming the line and the key.
caf::expected<scenario> parse_scenario_file(const std::string& path);
caf::expected<scenario> parse_scenario(const std::string& text, const std::string& file);

struct run_options {
  std::vector<std::string> files;
  /// Empty: a throwaway PostgreSQL per scenario.
  std::string database;
  bool json = false;
  /// Keep the process logs even when every assertion held.
  bool keep_logs = false;
  std::string binary;
};

/// Runs each file; answers the exit code: 0 only when every assertion held.
int run_scenarios(const run_options& options);

}  // namespace taskmill::scenario
