#include "tools/bench/bench.hpp"
#include "tools/bench/ceilings.hpp"

#include "tools/bench/flows.hpp"
#include "tools/bench/harness.hpp"
#include "tools/bench/history.hpp"
#include "tools/bench/keys.hpp"
#include "tools/bench/latency.hpp"
#include "tools/bench/limits.hpp"
#include "tools/bench/purge.hpp"

#include "actors/http/http_server.hpp"
#include "messages/errors.hpp"
#include "storage/bench/bench_sql.hpp"
#include "storage/pg.hpp"
#include "tools/http_fetch.hpp"

#include <unistd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <stdexcept>
#include <thread>

namespace taskmill {

const std::vector<std::string> bench_phases{
    "submit", "end-to-end", "latency",  "wake-up", "backlog",  "drain",   "limits",
    "keys",   "pooler",     "calendar", "flows",   "progress", "history", "purge"};

namespace {

using namespace bench;
using nlohmann::json;

constexpr const char* submit_type = "BENCH_SUBMIT";
constexpr const char* noop_type = "BENCH_NOOP";
constexpr const char* backlog_type = "BENCH_BACKLOG";
/// Due days later; no node runs them in the bench.
constexpr const char* calendar_type = "BENCH_CALENDAR";
/// Tasks of the submit measurement never become due, so no node runs them.
constexpr const char* never_due = "2100-01-01T00:00:00Z";
constexpr int submit_batch = 1000;

/// What one kind of bench run does; the full run measures what the issue
/// asks for, the quick one the same things smaller.
struct plan {
  int runs;
  double submit_seconds;
  int e2e_tasks;
  double latency_seconds;
  int latency_rate;
  int backlog_large;
  int backlog_small;
  /// Tasks the backlog measurement times, out of either backlog.
  int backlog_window;
  /// The drains: the plain one, under a calendar.
  int drain_tasks;
  /// The backlogs of the drains with and without limits, and their runs:
  /// a ratio of two drains moves more between runs than either rate.
  std::vector<int> limit_backlogs;
  int limit_runs;
  /// The uneven limits' drain: tasks of the types without a limit, and of
  /// the one held to 5 beside them.
  int even_tasks;
  int held_tasks;
  /// The keyed drain: its tasks, over how many keys (each limited to 5).
  int keyed_tasks;
  int keys;
  /// Fairness: one key's backlog; small keys submitting one task each at
  /// random times over the seconds given.
  int big_key_backlog;
  int small_keys;
  double fair_seconds;
  /// Tasks due days later under the calendar-scale drain.
  int calendar_tasks;
  /// One-task submit clients, each on a connection of its own.
  int many_clients;
  /// Steps of the dependency chain, children of the fan-out and fan-in.
  int chain_steps;
  int fan_children;
  /// Running tasks that each report progress every 100 ms, for how long.
  int talking_tasks;
  double talking_seconds;
  /// Finished tasks the table holds under the history's measurements.
  int history_tasks;
  /// Stopped tasks each of the purge's measurements purges.
  int purge_tasks;
  /// Due tasks the history's drains take, on the empty table and beside
  /// the finished ones.
  int history_due;
};

plan plan_for(bench_size size) {
  switch (size) {
    case bench_size::smoke:
      return {1,        0.5, 5'000,  2.0,   200,   20'000, 5'000,  5'000, 10'000,
              {20'000}, 1,   20'000, 5'000, 5'000, 500,    20'000, 100,   2.0,
              50'000,   64,  100,    500,   200,   3.0,    20'000, 5'000, 10'000};
    case bench_size::quick:
      return {1,         1.0, 10'000,  3.0,     200,    100'000, 10'000,    10'000,  20'000,
              {100'000}, 3,   100'000, 100'000, 20'000, 2'000,   20'000,    300,     3.0,
              200'000,   64,  200,     2'000,   1'000,  5.0,     1'000'000, 100'000, 100'000};
    case bench_size::full:
      break;
  }
  return {3,         5.0,      100'000, 15.0,      200,
          1'000'000, 10'000,   10'000,  100'000,   {100'000, 1'000'000},
          3,         100'000,  100'000, 100'000,   10'000,
          100'000,   1'000,    10.0,    5'000'000, 64,
          1'000,     10'000,   1'000,   10.0,      10'000'000,
          1'000'000, 1'000'000};
}

const char* size_name(bench_size size) {
  switch (size) {
    case bench_size::smoke:
      return "smoke";
    case bench_size::quick:
      return "quick";
    case bench_size::full:
      break;
  }
  return "full";
}

// -- the measurements --------------------------------------------------------------

/// Tasks per second accepted by POST /v1/tasks from `clients` kept-alive
/// connections, `per_request` tasks in each request.
double submit_rate(const bench_node& node, db::connection& conn, int clients, int per_request,
                   double seconds, const std::string& label) {
  run(conn, sql::reset_tasks);
  std::atomic<int64_t> accepted{0};
  auto start = steady::now();
  auto deadline =
      start + std::chrono::duration_cast<steady::duration>(std::chrono::duration<double>{seconds});
  in_parallel(clients, [&](int client) {
    http_session session{node.api()};
    auto prefix = label + "-" + std::to_string(client) + "-";
    for (int64_t request = 0; steady::now() < deadline && !interrupted; ++request) {
      std::string body;
      if (per_request == 1) {
        body = task_json(submit_type, prefix + std::to_string(request), never_due);
      } else {
        body = R"({"tasks":[)";
        for (int i = 0; i < per_request; ++i) {
          if (i > 0) body += ',';
          body +=
              task_json(submit_type, prefix + std::to_string(request * per_request + i), never_due);
        }
        body += "]}";
      }
      post_tasks(session, body);
      accepted += per_request;
    }
  });
  auto elapsed = seconds_since(start);
  check_interrupted();
  auto stored = count_tasks(conn, {submit_type}).all;
  if (stored != accepted)
    throw bench_failure{"submit: " + std::to_string(accepted.load()) + " tasks accepted but " +
                        std::to_string(stored) + " stored"};
  return static_cast<double>(accepted) / elapsed;
}

/// Tasks per second from the first submit (in batches, over the API) to the
/// last success, by the database clock; every task must succeed at attempt 1.
double end_to_end_rate(const bench_node& node, db::connection& conn, int tasks, int run_index) {
  run(conn, sql::reset_tasks);
  run(conn, sql::vacuum_tasks);
  std::vector<std::string> bodies;
  for (int first = 0; first < tasks; first += submit_batch) {
    std::string body = R"({"tasks":[)";
    for (int i = first; i < std::min(tasks, first + submit_batch); ++i) {
      if (i > first) body += ',';
      body +=
          task_json(noop_type, "e" + std::to_string(run_index) + "-" + std::to_string(i), nullptr);
    }
    bodies.push_back(body + "]}");
  }
  auto start = run(conn, sql::now).string(0, 0);
  std::atomic<size_t> next{0};
  in_parallel(2, [&](int) {
    http_session session{node.api()};
    for (size_t i = next++; i < bodies.size() && !interrupted; i = next++)
      post_tasks(session, bodies[i]);
  });
  check_interrupted();
  await_succeeded(conn, {noop_type}, tasks);
  auto counts = count_tasks(conn, {noop_type});
  if (counts.all != tasks || counts.claimed_again != 0)
    throw bench_failure{"end to end: " + std::to_string(counts.all) + " tasks stored of " +
                        std::to_string(tasks) + ", " + std::to_string(counts.claimed_again) +
                        " claimed more than once"};
  auto seconds =
      run(conn, sql::seconds_to_last_completion, {std::string{noop_type}, start}).float64(0, 0);
  return tasks / seconds;
}

/// A backlog of `backlog` due tasks of one type in an otherwise empty table.
double backlog_rate(bench_node& node, db::connection& conn, int backlog, int window,
                    int run_index) {
  return drain_rate(node, conn, {backlog_type}, window, [&] {
    run(conn, sql::reset_tasks);
    run(conn, sql::load_backlog,
        {std::string{backlog_type}, std::to_string(backlog),
         "b" + std::to_string(run_index) + "-"});
  });
}

/// The plain drain with the calendar (loaded once, kept) in the same table.
double calendar_drain_rate(bench_node& node, db::connection& conn, int tasks, int run_index) {
  return drain_rate(node, conn, {backlog_type}, tasks, [&] {
    run(conn, sql::delete_types, {types_param({backlog_type})});
    run(conn, sql::load_backlog,
        {std::string{backlog_type}, std::to_string(tasks), "c" + std::to_string(run_index) + "-"});
  });
}

// -- the report ----------------------------------------------------------------------

void print_table(const std::vector<report_row>& rows, const std::vector<target>& targets) {
  std::printf("\n%-44s %12s %12s %12s  %s\n", "measurement", "median", "min", "max", "unit");
  for (const auto& [name, s] : rows) {
    int decimals = s.unit == "ms" || s.unit == "ratio" ? 2 : s.unit == "us" ? 1 : 0;
    std::printf("%-44s %12s %12s %12s  %s\n", name.c_str(), fixed(s.median(), decimals).c_str(),
                fixed(s.min(), decimals).c_str(), fixed(s.max(), decimals).c_str(), s.unit.c_str());
  }
  std::printf("\n%-44s %12s %12s  %s\n", "target", "measured", "bound", "");
  for (const auto& t : targets)
    std::printf("%-44s %12s %3s %8s  %s\n", t.name.c_str(), fixed(t.value(), 2).c_str(),
                t.comparison.c_str(), fixed(t.bound, 2).c_str(), t.met() ? "met" : "MISSED");
  std::fflush(stdout);
}

json report_json(const bench_options& options, const std::string& where,
                 const std::vector<report_row>& rows, const std::vector<target>& targets) {
  json measurements = json::object();
  for (const auto& [name, s] : rows) {
    // The report is keyed by name: a second row of a name would replace
    // the first.
    if (measurements.contains(name)) throw bench_failure{"two rows are named \"" + name + "\""};
    measurements[name] = {{"unit", s.unit},
                          {"runs", s.runs},
                          {"median", s.median()},
                          {"min", s.min()},
                          {"max", s.max()}};
  }
  json checked = json::array();
  for (const auto& t : targets)
    checked.push_back({{"name", t.name},
                       {"measured", t.value()},
                       {"comparison", t.comparison},
                       {"bound", t.bound},
                       {"met", t.met()}});
  return {{"size", size_name(options.size)},
          {"database", where},
          {"cpus", std::thread::hardware_concurrency()},
          {"measurements", measurements},
          {"targets", checked}};
}

int measure(const bench_options& options) {
  auto p = plan_for(options.size);
  if (options.runs > 0) p.runs = p.limit_runs = options.runs;
  if (options.history_tasks > 0) p.history_tasks = options.history_tasks;
  if (options.purge_tasks > 0) p.purge_tasks = options.purge_tasks;
  auto want = [&](const char* phase) {
    return options.only.empty() ||
           std::find(options.only.begin(), options.only.end(), phase) != options.only.end();
  };
  bench_database database{options.database, options.size == bench_size::smoke};
  auto conn = connect(database.conninfo());

  arrivals seen;
  auto executor =
      http_server::start("127.0.0.1", 0, 1 << 20, [&seen](http_request req, http_reply reply) {
        // The handler starts here; reading the task is its work.
        auto started = steady::now();
        auto task = json::parse(req.body, nullptr, false);
        if (task.is_object()) seen.record(task.value("key", std::string{}), started);
        reply(http_response{200, "application/json", "{}"});
      });
  if (!executor) throw bench_failure{error_message(executor.error())};
  auto executor_url = "http://127.0.0.1:" + std::to_string((*executor)->port()) + "/run";
  bench_node node{options.binary,
                  database.conninfo(),
                  {std::string{"types."} + noop_type + ".executor=noop",
                   std::string{"types."} + backlog_type + ".executor=noop",
                   std::string{"types."} + inproc_type + ".executor=noop",
                   std::string{"types."} + latency_type + ".executor=http",
                   std::string{"types."} + latency_type + ".url=" + executor_url}};
  bench_node talking{options.binary,
                     database.conninfo(),
                     {std::string{"types."} + talking_type + ".executor=sleep"},
                     "talking"};
  bench_node pooled{
      options.binary,
      database.pooled_conninfo(),
      {std::string{"types."} + backlog_type + ".executor=noop",
       std::string{"types."} + noop_type + ".executor=noop", "database.pooler=transaction"},
      "pooled"};
  node.start();
  run(conn, sql::create_raw_table);

  series submit_single{"tasks/s"}, submit_batched{"tasks/s"}, e2e{"tasks/s"}, raw{"tasks/s"},
      e2e_ratio{"ratio"}, p50{"ms"}, p95{"ms"}, p99{"ms"}, latency_max{"ms"},
      backlog_small{"tasks/s"}, backlog_large{"tasks/s"}, backlog_ratio{"ratio"}, rss{"MiB"},
      wake_p50{"ms"}, wake_p99{"ms"}, many_submit{"tasks/s"}, raw_inserts{"rows/s"},
      many_ratio{"ratio"}, inproc_p50{"ms"}, inproc_p99{"ms"}, raw_pickup_p50{"ms"},
      raw_pickup_p99{"ms"}, http_over_raw{"ratio"}, drain{"tasks/s"}, raw_drain{"tasks/s"},
      drain_ratio{"ratio"}, drain_calendar{"tasks/s"}, calendar_ratio{"ratio"},
      pooled_drain{"tasks/s"}, pooled_drain_ratio{"ratio"}, pooled_submit{"tasks/s"},
      pooled_submit_ratio{"ratio"}, chain_step{"ms"}, fan_submit{"s"}, fan_out_rate{"tasks/s"},
      fan_out_ratio{"ratio"}, fan_in{"ms"}, progress_rate{"reports/s"},
      progress_statements{"statements/s"}, reports_per_statement{"ratio"};
  phase_report limits, keys, history, purge;
  auto peak_rss = [&] {
    return std::max(
        {node.peak_rss(), talking.peak_rss(), limits.peak_rss, keys.peak_rss, history.peak_rss});
  };
  // With the peak so far on each line, the line after a measurement that
  // raised it tells which one did.
  auto announce_of = [&](int total) -> announce_fn {
    return [&, total](const std::string& what, int r, int64_t more_rss) {
      progress(what + " (run " + std::to_string(r + 1) + " of " + std::to_string(total) +
               "; nodes' peak RSS so far " + std::to_string(std::max(peak_rss(), more_rss) >> 20) +
               " MiB)");
    };
  };
  auto announce = announce_of(p.runs);
  auto runs = [&](const std::string& what, int r) { announce(what, r, 0); };
  auto clients = std::to_string(p.many_clients);

  // The pooler's submits are measured against these.
  for (int r = 0; r < p.runs && (want("submit") || want("pooler")); ++r) {
    runs("submit, one task per request, 4 clients", r);
    submit_single.runs.push_back(
        submit_rate(node, conn, 4, 1, p.submit_seconds, "s" + std::to_string(r)));
    runs("submit, 1000 tasks per request, 2 clients", r);
    submit_batched.runs.push_back(
        submit_rate(node, conn, 2, submit_batch, p.submit_seconds, "b" + std::to_string(r)));
    runs("submit, one task per request, " + clients + " clients", r);
    many_submit.runs.push_back(
        submit_rate(node, conn, p.many_clients, 1, p.submit_seconds, "m" + std::to_string(r)));
    runs("raw single-row inserts, " + clients + " connections", r);
    raw_inserts.runs.push_back(
        raw_insert_rate(database.conninfo(), p.many_clients, p.submit_seconds));
    many_ratio.runs.push_back(many_submit.runs.back() / raw_inserts.runs.back());
  }
  for (int r = 0; r < p.runs && want("end-to-end"); ++r) {
    runs("raw-SQL ceiling, " + std::to_string(p.e2e_tasks) + " jobs, best of 9 shapes", r);
    auto best = best_ceiling(
        [&](sql_shape shape) { return raw_sql_rate(database.conninfo(), p.e2e_tasks, shape); });
    progress("  raw-SQL ceiling " + std::to_string(static_cast<int64_t>(best.rate)) + " tasks/s, " +
             describe(best.shape));
    raw.runs.push_back(best.rate);
    runs("end to end, " + std::to_string(p.e2e_tasks) + " noop tasks", r);
    e2e.runs.push_back(end_to_end_rate(node, conn, p.e2e_tasks, r));
    e2e_ratio.runs.push_back(e2e.runs.back() / raw.runs.back());
  }
  for (int r = 0; r < p.runs && want("latency"); ++r) {
    runs("pickup latency at " + std::to_string(p.latency_rate) + " tasks/s, HTTP executor", r);
    auto l = pickup_latency(conn, seen, {p.latency_seconds, p.latency_rate}, r);
    p50.runs.push_back(l.p50);
    p95.runs.push_back(l.p95);
    p99.runs.push_back(l.p99);
    latency_max.runs.push_back(l.max);
    runs("pickup latency at " + std::to_string(p.latency_rate) + " tasks/s, in-process", r);
    auto in = inproc_pickup_latency(conn, {p.latency_seconds, p.latency_rate}, r);
    inproc_p50.runs.push_back(in.p50);
    inproc_p99.runs.push_back(in.p99);
    runs("pickup latency at " + std::to_string(p.latency_rate) + " jobs/s, plain SQL", r);
    auto raw_pickup = raw_pickup_latency(database.conninfo(), {p.latency_seconds, p.latency_rate});
    raw_pickup_p50.runs.push_back(raw_pickup.p50);
    raw_pickup_p99.runs.push_back(raw_pickup.p99);
    http_over_raw.runs.push_back(l.p50 / raw_pickup.p50);
  }
  for (int r = 0; r < p.runs && want("wake-up"); ++r) {
    runs("wake-up over CAF, two more nodes, at " + std::to_string(p.latency_rate) + " tasks/s", r);
    node.stop();
    auto l = cluster_wakeup(options.binary, conn, database.conninfo(), executor_url, seen,
                            {p.latency_seconds, p.latency_rate}, r);
    wake_p50.runs.push_back(l.p50);
    wake_p99.runs.push_back(l.p99);
  }
  for (int r = 0; r < p.runs && want("backlog"); ++r) {
    runs("backlog of " + std::to_string(p.backlog_small), r);
    backlog_small.runs.push_back(backlog_rate(node, conn, p.backlog_small, p.backlog_window, r));
    runs("backlog of " + std::to_string(p.backlog_large), r);
    backlog_large.runs.push_back(backlog_rate(node, conn, p.backlog_large, p.backlog_window, r));
    backlog_ratio.runs.push_back(backlog_large.runs.back() / backlog_small.runs.back());
  }
  for (int r = 0;
       r < p.runs && (want("drain") || want("pooler") || want("calendar") || want("flows")); ++r) {
    runs("raw drain ceiling, " + std::to_string(p.drain_tasks) + " jobs, best of 9 shapes", r);
    auto best = best_ceiling(
        [&](sql_shape shape) { return raw_drain_rate(database.conninfo(), p.drain_tasks, shape); });
    progress("  raw drain ceiling " + std::to_string(static_cast<int64_t>(best.rate)) +
             " tasks/s, " + describe(best.shape));
    raw_drain.runs.push_back(best.rate);
    runs("drain of " + std::to_string(p.drain_tasks), r);
    drain.runs.push_back(backlog_rate(node, conn, p.drain_tasks, p.drain_tasks, r));
    drain_ratio.runs.push_back(drain.runs.back() / raw_drain.runs.back());
  }
  if (want("limits")) {
    // Alone on the server, as in a full run, where the drains before left
    // it stopped.
    node.stop();
    limits = measure_limits({p.limit_runs, p.limit_backlogs, p.even_tasks, p.held_tasks},
                            options.binary, database.conninfo(), conn, announce_of(p.limit_runs));
  }
  if (want("keys")) {
    node.stop();
    keys = measure_keys(
        {p.runs, p.keyed_tasks, p.keys, 5, p.big_key_backlog, p.small_keys, p.fair_seconds},
        options.binary, database.conninfo(), conn, announce);
  }
  for (int r = 0; r < p.runs && want("pooler") && !database.pooled_conninfo().empty(); ++r) {
    runs("drain of " + std::to_string(p.drain_tasks) + " through PgBouncer, transaction mode", r);
    pooled_drain.runs.push_back(backlog_rate(pooled, conn, p.drain_tasks, p.drain_tasks, r));
    pooled_drain_ratio.runs.push_back(pooled_drain.runs.back() / drain.runs[r]);
    runs("submit, one task per request, 4 clients, through PgBouncer", r);
    pooled.start();
    pooled_submit.runs.push_back(
        submit_rate(pooled, conn, 4, 1, p.submit_seconds, "p" + std::to_string(r)));
    pooled.stop();
    pooled_submit_ratio.runs.push_back(pooled_submit.runs.back() / submit_single.runs[r]);
  }
  if (want("calendar")) {
    progress("calendar of " + std::to_string(p.calendar_tasks) + " tasks due days later");
    run(conn, sql::reset_tasks);
    run(conn, sql::load_calendar, {std::string{calendar_type}, std::to_string(p.calendar_tasks)});
  }
  for (int r = 0; r < p.runs && want("calendar"); ++r) {
    runs("drain of " + std::to_string(p.drain_tasks) + " beside the calendar", r);
    drain_calendar.runs.push_back(calendar_drain_rate(node, conn, p.drain_tasks, r));
    calendar_ratio.runs.push_back(drain_calendar.runs.back() / drain.median());
  }
  for (int r = 0; r < p.runs && want("flows"); ++r) {
    runs("a chain of " + std::to_string(p.chain_steps) + " tasks, each after the one before", r);
    chain_step.runs.push_back(chain_step_ms(node, conn, backlog_type, p.chain_steps));
    runs("fan-out to " + std::to_string(p.fan_children) + " tasks and fan-in from them", r);
    auto fan = fan_out_and_in(node, conn, backlog_type, p.fan_children);
    fan_submit.runs.push_back(fan.submit_s);
    fan_out_rate.runs.push_back(p.fan_children / fan.fan_out_s);
    fan_out_ratio.runs.push_back(fan_out_rate.runs.back() / drain.median());
    fan_in.runs.push_back(fan.fan_in_ms);
  }
  for (int r = 0; r < p.runs && want("progress"); ++r) {
    runs(std::to_string(p.talking_tasks) + " running tasks reporting progress every 100 ms", r);
    auto reports =
        progress_reports(talking, conn, database.conninfo(), p.talking_tasks, p.talking_seconds);
    progress_rate.runs.push_back(reports.reports_per_s);
    progress_statements.runs.push_back(reports.statements_per_s);
    reports_per_statement.runs.push_back(reports.reports_per_s / reports.statements_per_s);
  }
  if (want("history")) {
    node.stop();
    history =
        measure_history({p.runs, p.history_tasks, p.history_due, p.latency_seconds, p.latency_rate},
                        options.binary, database.conninfo(), conn, announce);
  }
  if (want("purge")) {
    node.stop();
    purge = measure_purge({p.runs, p.purge_tasks}, conn, announce);
  }
  rss.runs.push_back(static_cast<double>(peak_rss()) / (1 << 20));
  run(conn, sql::reset_tasks);

  auto k = short_count;
  auto drains = k(p.drain_tasks);
  std::vector<report_row> rows{
      {"submit: 1 task/request, 4 clients", submit_single},
      {"submit: 1000 tasks/request, 2 clients", submit_batched},
      {"submit: 1 task/request, " + clients + " clients", many_submit},
      {"raw single-row inserts, " + clients + " connections", raw_inserts},
      {"submit " + clients + " clients / raw inserts", many_ratio},
      {"raw-SQL ceiling: " + k(p.e2e_tasks) + " jobs, best of 9 shapes", raw},
      {"end to end: " + k(p.e2e_tasks) + " noop tasks", e2e},
      {"end to end / raw-SQL ceiling", e2e_ratio},
      {"pickup latency p50 (HTTP executor)", p50},
      {"pickup latency p95 (HTTP executor)", p95},
      {"pickup latency p99 (HTTP executor)", p99},
      {"pickup latency max (HTTP executor)", latency_max},
      {"pickup latency p50 (in-process, to its start)", inproc_p50},
      {"pickup latency p99 (in-process, to its start)", inproc_p99},
      {"raw pickup p50 (plain SQL, insert to claimed)", raw_pickup_p50},
      {"raw pickup p99", raw_pickup_p99},
      {"HTTP pickup p50 / raw pickup p50", http_over_raw},
      {"wake-up over CAF p50 (submit on A, start on B)", wake_p50},
      {"wake-up over CAF p99", wake_p99},
      {"backlog " + k(p.backlog_small) + ": first " + k(p.backlog_window) + " tasks",
       backlog_small},
      {"backlog " + k(p.backlog_large) + ": first " + k(p.backlog_window) + " tasks",
       backlog_large},
      {"backlog " + k(p.backlog_large) + " / backlog " + k(p.backlog_small), backlog_ratio},
      {"raw drain ceiling: " + drains + " jobs, best of 9 shapes", raw_drain},
      {"drain: " + drains + " due tasks", drain},
      {"drain / raw drain ceiling", drain_ratio},
      {"drain: " + drains + " beside " + k(p.calendar_tasks) + " due later", drain_calendar},
      {"drain beside the calendar / plain drain", calendar_ratio},
      {"drain: " + drains + " through PgBouncer (transaction)", pooled_drain},
      {"that drain / direct drain", pooled_drain_ratio},
      {"submit: 1 task/request, 4 clients, PgBouncer", pooled_submit},
      {"that submit / direct submit", pooled_submit_ratio},
      {"chain of " + k(p.chain_steps) + ": time per step", chain_step},
      {"submit of a fan-out to " + k(p.fan_children) + " and fan-in", fan_submit},
      {"fan-out: its " + k(p.fan_children) + " children drained", fan_out_rate},
      {"fan-out drain / plain drain", fan_out_ratio},
      {"fan-in from " + k(p.fan_children) + ": last parent to its start", fan_in},
      {"progress: " + k(p.talking_tasks) + " running tasks reporting every 100 ms", progress_rate},
      {"statements storing those reports", progress_statements},
      {"progress reports per statement", reports_per_statement},
      {"node peak RSS", rss},
  };
  auto rows_before_limits = std::find_if(rows.begin(), rows.end(), [](const auto& row) {
    return row.first.rfind("drain: ", 0) == 0 && row.first.find("beside") != std::string::npos;
  });
  rows_before_limits = rows.insert(rows_before_limits, limits.rows.begin(), limits.rows.end());
  rows.insert(rows_before_limits + static_cast<std::ptrdiff_t>(limits.rows.size()),
              keys.rows.begin(), keys.rows.end());
  std::vector<target> targets{
      {"end to end >= 75% of the raw-SQL ceiling", e2e_ratio, ">=", 0.75},
      {"drain >= 90% of the raw drain ceiling", drain_ratio, ">=", 0.9},
      {"pickup p50, HTTP executor (ms)", p50, "<=", 1},
      {"pickup p99, HTTP executor (ms)", p99, "<=", 20},
      {"pickup p50, in-process (ms)", inproc_p50, "<=", 0.7},
      {"pickup p99, in-process (ms)", inproc_p99, "<=", 2},
      {"wake-up over CAF p99 (ms)", wake_p99, "<=", 50},
      {"submit " + clients + " clients >= 60% of raw inserts", many_ratio, ">=", 0.6},
      {"drain beside the calendar >= 90% of plain", calendar_ratio, ">=", 0.9},
      {"backlog " + k(p.backlog_large) + " >= 80% of " + k(p.backlog_small), backlog_ratio,
       ">=", 0.8},
      {"chain: time per step (ms)", chain_step, "<=", 5},
      {"node peak RSS (MiB)", rss, "<=", 50},
  };
  targets.insert(targets.end(), limits.targets.begin(), limits.targets.end());
  targets.insert(targets.end(), keys.targets.begin(), keys.targets.end());
  rows.insert(rows.end() - 1, history.rows.begin(), history.rows.end());
  targets.insert(targets.end(), history.targets.begin(), history.targets.end());
  rows.insert(rows.end() - 1, purge.rows.begin(), purge.rows.end());
  std::erase_if(rows, [](const auto& row) { return row.second.runs.empty(); });
  std::erase_if(targets, [](const target& t) { return t.measured.runs.empty(); });
  std::printf("taskmill bench (%s) on %s, %u CPUs\n", size_name(options.size),
              database.description().c_str(), std::thread::hardware_concurrency());
  print_table(rows, targets);
  if (!options.output.empty()) {
    std::ofstream out{options.output};
    out << report_json(options, database.description(), rows, targets).dump(2) << "\n";
    if (!out) throw bench_failure{"cannot write " + options.output};
    progress("wrote " + options.output);
  }
  return 0;
}

}  // namespace

int run_bench(const bench_options& options) {
  std::signal(SIGINT, on_interrupt);
  std::signal(SIGTERM, on_interrupt);
  try {
    return measure(options);
  } catch (const std::exception& e) {
    std::cerr << "bench failed: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace taskmill
