#pragma once

// The scenario runner's insides, shared by its files: runner.cpp sets a
// scenario up, runs its steps and reports; checks.cpp waits for and checks
// what a scenario asserts.

#include "config/config.hpp"
#include "storage/pg.hpp"
#include "storage/scenario/scenario_sql.hpp"
#include "tools/node_process.hpp"
#include "tools/postgres/embedded_postgres.hpp"
#include "tools/scenario/scenario.hpp"
#include "tools/tcp_proxy.hpp"

#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace taskmill::scenario::detail {

namespace fs = std::filesystem;
namespace sql = db::scenario_sql;
using nlohmann::json;
using steady = std::chrono::steady_clock;

/// Set by SIGINT: the scenario stops at its next step or wait.
extern std::atomic<bool> interrupted;

/// A step that could not be done; ends the scenario.
struct step_failure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

void check_interrupted();
/// Sleeps, stopping at an interrupt.
void sleep_checked(milliseconds d);
/// "1.5s".
std::string seconds_text(double s);

struct assertion {
  int line = 0;
  std::string what;
  std::string expected;
  std::string found;
  bool held = false;
};

struct step_report {
  int index = 0;
  int line = 0;
  std::string kind;
  std::string what;
  double started_s = 0;
  double took_s = 0;
  bool ok = true;
  std::string message;
};

/// One node of the scenario: its ports stay the same across restarts.
struct node_run {
  node_spec spec;
  uint16_t api_port = 0;
  uint16_t cluster_port = 0;
  std::vector<std::string> extra;
  std::unique_ptr<node_process> process;
  /// Where its connections to PostgreSQL pass, and where the other nodes
  /// reach it (its advertised cluster address), in a scenario that cuts
  /// nodes off: a cut makes them silent, across restarts, until healed.
  std::unique_ptr<tcp_proxy> database_link;
  std::unique_ptr<tcp_proxy> cluster_link;
  /// Cut from PostgreSQL; cut from the other nodes.
  bool cut = false;
  bool cut_off_peers = false;
  /// Its processes whose links to the other nodes' ports are silenced.
  std::vector<pid_t> silenced;
  bool frozen = false;
  std::string api() const { return "http://127.0.0.1:" + std::to_string(api_port); }
};

struct kill_record {
  std::string node;
  std::string at;  // RFC 3339
};

class runner {
 public:
  runner(const scenario& sc, const run_options& options) : sc_(sc), options_(options) {}

  ~runner() { tear_down(); }

  /// Answers whether every assertion held.
  bool run();
  json report_json() const;

 private:
  void say(const std::string& line) const {
    auto& out = options_.json ? std::cerr : std::cout;
    out << line << std::endl;
  }
  double elapsed() const { return std::chrono::duration<double>(steady::now() - started_).count(); }

  void set_up();
  void tear_down();
  void start_database();
  db::connection& conn();
  db::result query(const char* statement, const std::vector<db::param>& params = {});
  std::string scalar(const std::string& statement);

  std::string expand(const std::string& text, int64_t i) const;
  std::string api_of(const std::string& node) const;
  void retire(node_run& n);
  void start_node(node_run& n, const std::vector<std::string>& set);
  void kill_node(node_run& n);
  void thaw_node(node_run& n);
  void cut_node(node_run& n, bool from_postgres, bool from_peers);
  void heal_node(node_run& n);
  /// Silences the links n's process dials to the other nodes.
  void silence_dialled_links(node_run& n);
  std::vector<node_run*> targets(const step& s);
  /// cut, heal, freeze or thaw.
  void set_apart(const step& s, step_report& r);
  void point_executors_at_a_node();

  void run_step(const step& s, step_report& r);
  void submit(const step& s, step_report& r);
  void change(const step& s, step_report& r, const char* path);
  void call_api(const step& s, step_report& r);
  void run_sql(const step& s, step_report& r);
  void postgres(const step& s, step_report& r);
  void chaos(const step& s, step_report& r);
  void wait(const step& s, step_report& r);
  void check(const step& s, step_report& r);

  /// Whether a wait condition holds now, and what was found.
  std::pair<bool, std::string> condition(const step& s);
  std::pair<bool, std::string> count_condition(const count_check& c);
  void add(const step& s, std::string what, std::string expected, std::string found, bool held);
  std::vector<delivery> all_deliveries() const;
  std::string task_json(const task_template& t, int64_t i) const;

  const scenario& sc_;
  const run_options& options_;
  steady::time_point started_ = steady::now();
  std::string logs_;
  std::optional<db::embedded_postgres> pg_;
  std::string conninfo_;
  std::optional<db::connection> conn_;
  std::map<std::string, std::unique_ptr<recording_executor>> executors_;
  std::map<std::string, node_run> nodes_;
  std::vector<kill_record> kills_;
  std::vector<step_report> steps_;
  std::vector<assertion> assertions_;
  std::string failure_;
  std::mt19937_64 random_{20261123};
};

}  // namespace taskmill::scenario::detail
