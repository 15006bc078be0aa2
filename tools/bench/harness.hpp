#pragma once

// What the bench's measurements share: failing and interrupting a run, the
// bench's own database and the node under test, as processes.

#include "messages/errors.hpp"
#include "storage/bench/bench_sql.hpp"
#include "storage/pg.hpp"
#include "tools/http_fetch.hpp"
#include "tools/node_process.hpp"
#include "tools/postgres/embedded_postgres.hpp"
#include "tools/postgres/pgbouncer.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace taskmill::bench {

namespace fs = std::filesystem;
namespace sql = db::bench_sql;
using steady = std::chrono::steady_clock;
using std::chrono::milliseconds;

/// Set by SIGINT and SIGTERM: the run stops at its next check.
extern std::atomic<bool> interrupted;

/// Sets `interrupted` (the handler of SIGINT and SIGTERM during a run).
extern "C" void on_interrupt(int);

struct bench_failure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

void check_interrupted();
/// A line on stderr about what the bench does now.
void progress(const std::string& line);
double seconds_since(steady::time_point start);
/// `v` with `decimals` digits after the point.
std::string fixed(double v, int decimals);
void sleep_checked(milliseconds d);

// -- the database --------------------------------------------------------------

/// A key=value connection string for the same server and another database.
std::string with_dbname(const std::string& conninfo, const std::string& dbname);
db::connection connect(const std::string& conninfo);
db::result run(db::connection& conn, const char* statement, const std::vector<db::param>& params);
db::result run(db::connection& conn, const char* statement);

/// The bench's own database: on a private server in a temporary directory, or
/// created on the given server and dropped afterwards. A private server is
/// durable unless `throwaway` (the smoke run, which checks that every
/// measurement runs, not its figures).
class bench_database {
 public:
  /// On `server`, a database named after `label` and this process; without
  /// one, a private server of its own.
  bench_database(const std::string& server, bool throwaway, const std::string& label = "bench") {
    if (server.empty()) {
      start_private_server(throwaway);
    } else {
      admin_conninfo_ = server;
      name_ = "taskmill_" + label + "_" + std::to_string(getpid());
      auto admin = connect(admin_conninfo_);
      run(admin, ("CREATE DATABASE " + name_).c_str());
      conninfo_ = with_dbname(server, name_);
    }
  }

  ~bench_database() {
    if (!name_.empty()) {
      auto admin =
          db::connection::open(admin_conninfo_, std::chrono::minutes{1}, std::chrono::seconds{10});
      if (admin) admin->exec("DROP DATABASE IF EXISTS " + name_ + " WITH (FORCE)");
    }
    if (server_) {
      auto dir = server_->dir();
      db::stop_pgbouncer(dir);
      server_->stop();
      server_.reset();
      std::error_code ignored;
      fs::remove_all(dir, ignored);
      fs::remove_all(temp_dir_, ignored);
    }
  }

  bench_database(const bench_database&) = delete;
  bench_database& operator=(const bench_database&) = delete;

  const std::string& conninfo() const { return conninfo_; }
  /// The same database through PgBouncer in transaction mode (20 server
  /// connections), in front of the private server; empty without one.
  const std::string& pooled_conninfo() const { return pooled_conninfo_; }
  std::string description() const {
    if (!server_) return "database " + name_ + " on the given server";
    return std::string{"private PostgreSQL ("} + (throwaway_ ? "fsync off" : "durable settings") +
           ") on port " + std::to_string(server_->port());
  }

 private:
  void start_private_server(bool throwaway) {
    temp_dir_ = (fs::temp_directory_path() / "taskmill-bench-XXXXXX").string();
    if (!mkdtemp(temp_dir_.data())) throw bench_failure{"cannot create a temporary directory"};
    db::embedded_postgres_options options;
    options.dir = temp_dir_;
    options.throwaway = throwaway;
    throwaway_ = throwaway;
    progress("starting a private PostgreSQL in " + temp_dir_);
    auto started = db::embedded_postgres::start(options);
    if (!started) {
      fs::remove_all(temp_dir_);
      throw bench_failure{error_message(started.error())};
    }
    server_.emplace(std::move(*started));
    conninfo_ = server_->conninfo();
    auto pooler = db::start_pgbouncer(server_->dir(), server_->conninfo(), 20);
    if (pooler)
      pooled_conninfo_ = *pooler;
    else
      progress("  no PgBouncer, no measurement through it: " + error_message(pooler.error()));
  }

  std::optional<db::embedded_postgres> server_;
  bool throwaway_ = false;
  std::string temp_dir_;
  std::string admin_conninfo_;
  std::string name_;
  std::string conninfo_;
  std::string pooled_conninfo_;
};

// -- the node --------------------------------------------------------------------

/// The node under test, a process of its own; restarted for the backlog
/// measurement, under a new name each time.
class bench_node {
 public:
  /// `types`: config overrides saying which types it runs; `role` names it
  /// among the bench's nodes.
  bench_node(std::string binary, std::string conninfo, std::vector<std::string> types,
             std::string role = "bench")
      : role_(std::move(role)),
        binary_(std::move(binary)),
        conninfo_(std::move(conninfo)),
        types_(std::move(types)) {}

  void start() {
    port_ = free_loopback_port();
    std::vector<std::string> options{
        "api.listen=127.0.0.1:" + std::to_string(port_),
        "cluster.listen=127.0.0.1:0",
        "cluster.secret=bench-" + std::to_string(getpid()),
        "node.log_level=warn",
    };
    options.insert(options.end(), types_.begin(), types_.end());
    auto name = role_ + "-" + std::to_string(getpid()) + "-" + std::to_string(++incarnation_);
    process_ = std::make_unique<node_process>(binary_, name, conninfo_, options);
    auto deadline = steady::now() + std::chrono::seconds{60};
    while (steady::now() < deadline) {
      auto ready = http_fetch("GET", api() + "/readyz", {}, {}, std::chrono::seconds{2});
      if (ready && ready->status == 200) return;
      sleep_checked(milliseconds{50});
    }
    throw bench_failure{"the node did not become ready within 60 s:\n" + process_->log_tail()};
  }

  /// SIGTERM: the node drains what it runs and stops.
  void stop() {
    if (!process_) return;
    peak_rss_ = std::max(peak_rss_, process_->peak_rss());
    last_cpu_seconds_ = process_->cpu_seconds();
    auto tail = process_->log_tail();
    int code = process_->stop();
    process_.reset();
    if (code != 0)
      throw bench_failure{"the node exited with " + std::to_string(code) + ":\n" + tail};
  }

  std::string api() const { return "http://127.0.0.1:" + std::to_string(port_); }

  /// Its running incarnation's resident memory now, in bytes (0: none).
  int64_t rss() const { return process_ ? process_->rss() : 0; }

  /// The file descriptors its running incarnation holds open (0: none).
  int open_fds() const { return process_ ? process_->open_fds() : 0; }

  /// The processor time its last incarnation used, to its stop.
  double last_cpu_seconds() const { return last_cpu_seconds_; }

  /// The largest resident set of any incarnation so far.
  int64_t peak_rss() const {
    return std::max(peak_rss_, process_ ? process_->peak_rss() : int64_t{0});
  }

 private:
  std::string role_;
  std::string binary_;
  std::string conninfo_;
  std::vector<std::string> types_;
  std::unique_ptr<node_process> process_;
  uint16_t port_ = 0;
  int incarnation_ = 0;
  int64_t peak_rss_ = 0;
  double last_cpu_seconds_ = 0;
};

struct task_counts {
  int64_t succeeded = 0;
  int64_t claimed_again = 0;
  int64_t all = 0;
};

using type_list = std::vector<std::string>;

std::string types_param(const type_list& types);
task_counts count_tasks(db::connection& conn, const type_list& types);
/// Waits until `expected` tasks of `types` have succeeded since
/// `finished_since` (by the database clock); fails when none finished for a
/// long while. The count reads every task finished since then (40 ms at
/// 100,000 on the development machine): taken every 50 ms beside a drain it
/// cost the drain 6-30% of its rate, which the raw ceilings, polling
/// nothing, never paid. So the pause between counts is half the time that
/// the rate seen so far says is left, and the drains count from their start
/// (beside 10M finished tasks a count from the first took seconds of a core).
void await_succeeded(db::connection& conn, const type_list& types, int64_t expected,
                     const std::string& finished_since = "-infinity");

/// Starts the node afresh over what `load` stored while it was down and
/// answers the rate at which it works off the first `window` tasks of
/// `types`, from its first claim to its last completion. Leaves the node
/// stopped.
double drain_rate(bench_node& node, db::connection& conn, const type_list& types, int window,
                  const std::function<void()>& load);

/// Several runs of one measurement.
struct series {
  explicit series(std::string u) : unit(std::move(u)) {}

  std::string unit;
  std::vector<double> runs;

  double median() const {
    if (runs.empty()) return 0;
    auto sorted = runs;
    std::sort(sorted.begin(), sorted.end());
    auto n = sorted.size();
    return n % 2 == 1 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
  }
  double min() const { return runs.empty() ? 0 : *std::min_element(runs.begin(), runs.end()); }
  double max() const { return runs.empty() ? 0 : *std::max_element(runs.begin(), runs.end()); }
};

/// A line of the report: what was measured, and its runs.
using report_row = std::pair<std::string, series>;

/// A bound a measurement's median is held to (reported, not failed).
struct target {
  std::string name;
  series measured;
  std::string comparison;
  double bound;
  double value() const { return measured.median(); }
  bool met() const { return comparison == ">=" ? value() >= bound : value() <= bound; }
};

/// 100000 as "100k", 1000000 as "1M".
std::string short_count(int n);

/// A drain, and where its claims spent their time.
struct drain_run {
  double rate;               // tasks/s
  double claim_us_per_task;  // in PostgreSQL, in taskmill.claim_by_turns
  double tasks_per_claim;
  double node_us_per_task;  // the node's processor time, user and system
  // Tasks claimed and not yet stored as finished, on average over the drain
  // (Little's law: the rate times the time from a task's claim to its
  // outcome's commit). A running limit bounds it; where the limit is below
  // what the drain holds without it, the limit is what slows the drain.
  double tasks_held;
};

/// While a phase measures where claims spend their time, PostgreSQL times
/// each function call (track_functions), for drain_run's figures.
void time_function_calls(db::connection& conn, bool on);

/// drain_rate, and where the claims spent their time (printed, with the
/// functions that took most time in themselves).
drain_run profiled_drain(bench_node& node, db::connection& conn, const type_list& types, int tasks,
                         const std::function<void()>& load);

/// What a phase of several nodes measured, for the bench's table.
struct phase_report {
  std::vector<report_row> rows;
  std::vector<target> targets;
  /// The largest resident set of the phase's nodes.
  int64_t peak_rss = 0;
};

/// Says what a phase measures now, in which run, and its nodes' peak RSS so
/// far.
using announce_fn = std::function<void(const std::string& what, int run, int64_t peak_rss)>;

/// One task of `type` and `key` as POST /v1/tasks takes it, due at
/// `execute_at` (RFC 3339; null: now), with `payload` (JSON; null: none).
std::string task_json(const char* type, const std::string& key, const char* execute_at,
                      const char* payload = nullptr);

/// POSTs `body` to /v1/tasks, failing the bench unless it is accepted.
void post_tasks(http_session& session, const std::string& body);

/// Runs `work(i)` on `n` threads and rethrows the first failure.
void in_parallel(int n, const std::function<void(int)>& work);

}  // namespace taskmill::bench
