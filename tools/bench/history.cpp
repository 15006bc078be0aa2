#include "tools/bench/history.hpp"

#include "messages/errors.hpp"
#include "storage/bench/bench_sql.hpp"
#include "tools/bench/latency.hpp"
#include "tools/http_fetch.hpp"

#include <algorithm>

namespace taskmill::bench {
namespace {

/// The finished tasks; no node runs the type.
constexpr const char* history_type = "BENCH_HISTORY";
/// The drain's tasks.
constexpr const char* drain_type = "BENCH_HISTORY_DRAIN";
/// A history that long is kept under a purge retention of a month, which
/// keeps a table a day of stopped tasks: the history comes with them.
constexpr int history_days = 30;
/// Each call is timed this many times, once a round of all of them, so
/// that each median spans the same second or two and not a few
/// milliseconds that whatever else the server does may fill; its median
/// counts.
constexpr int calls_timed = 101;

/// What the console's pages and an operator's scripts call: the dashboard,
/// the task list unfiltered and by status and type, a task's page, the
/// nodes, the alerts and the metrics. `{id}` is a task that succeeded.
const std::vector<std::string> api_calls{"/v1/stats",
                                         "/v1/tasks",
                                         "/v1/tasks?status=succeeded",
                                         "/v1/tasks?type=" + std::string{drain_type},
                                         "/v1/tasks/{id}",
                                         "/v1/tasks/{id}/attempts",
                                         "/v1/nodes",
                                         "/v1/alerts?limit=10",
                                         "/metrics"};

struct table_figures {
  double drain = 0;
  /// The median time of each of api_calls, ms.
  std::vector<double> call_ms;
  /// The first of the stats' calls, ms: past the rows counted exactly, it
  /// takes the sample of finished tasks that the node then holds
  /// (storage/finished_estimate.hpp).
  double stats_first_ms = 0;
};

void time_calls(const bench_node& node, db::connection& conn, table_figures& f) {
  auto id = run(conn, sql::newest_succeeded).string(0, 0);
  auto targets = api_calls;
  for (auto& target : targets)
    if (auto at = target.find("{id}"); at != std::string::npos) target.replace(at, 4, id);
  std::vector<series> ms(targets.size(), series{"ms"});
  http_session session{node.api()};
  for (int round = 0; round < calls_timed; ++round)
    for (size_t i = 0; i < targets.size(); ++i) {
      auto start = steady::now();
      auto answer = session.call("GET", targets[i]);
      if (!answer || answer->status != 200)
        throw bench_failure{"history: GET " + targets[i] + " answered " +
                            (answer ? std::to_string(answer->status) + " " + answer->body
                                    : error_message(answer.error()))};
      ms[i].runs.push_back(seconds_since(start) * 1000);
    }
  for (size_t i = 0; i < targets.size(); ++i) {
    f.call_ms.push_back(ms[i].median());
    if (api_calls[i] == "/v1/stats") f.stats_first_ms = ms[i].runs.front();
  }
}

table_figures measure_table(bench_node& node, db::connection& conn, const history_plan& plan,
                            const std::string& label) {
  table_figures f;
  // The table's autovacuum runs so far (sql::soak_table's fifth column).
  auto autovacuums = [&] { return run(conn, sql::soak_table).int64(0, 4); };
  auto vacuums_before = autovacuums();
  f.drain = drain_rate(node, conn, {drain_type}, plan.drain_tasks, [&] {
    run(conn, sql::delete_types, {types_param({drain_type})});
    run(conn, sql::load_backlog,
        {std::string{drain_type}, std::to_string(plan.drain_tasks), label + "-"});
  });
  progress("  autovacuums of the tasks table during the drain: " +
           std::to_string(autovacuums() - vacuums_before));
  // The drain leaves the node stopped.
  node.start();
  // The drain leaves its tasks' dead rows among the live tasks, which each
  // count of waiting tasks steps over until autovacuum clears them, a
  // minute or two later on either side; and a table fresh from a drain has
  // no statistics until autovacuum comes round. The calls are timed on the
  // table autovacuum leaves, so that they compare the history and not where
  // autovacuum happened to be.
  auto vacuum_start = steady::now();
  run(conn, sql::vacuum_live_tasks);
  progress("  the live tasks vacuumed in " + fixed(seconds_since(vacuum_start), 1) + " s");
  run(conn, sql::analyze_tasks);
  // Each start of a bench node is a node of its own: the node list would
  // grow with the runs before, and more so on the side measured last.
  run(conn, sql::forget_stopped_nodes);
  // The drain's writes set off a checkpoint, larger beside a long history
  // (its moves write into larger indexes), which would land among the
  // calls: they are timed on a server not writing back a drain, as the
  // drains themselves start (drain_rate).
  auto checkpoint_start = steady::now();
  if (auto done = conn.exec(sql::checkpoint); !done)
    progress("  no CHECKPOINT (" + error_message(done.error()) + ")");
  progress("  checkpoint before the calls in " + fixed(seconds_since(checkpoint_start), 1) +
           " s; autovacuum workers at work: " +
           std::to_string(run(conn, sql::autovacuum_workers).int64(0, 0)));
  time_calls(node, conn, f);
  return f;
}

/// Slices of each side's in-process pickup, taken in turn.
constexpr int pickup_slices = 4;

/// The in-process pickup beside the history and on an empty database of the
/// same server, each side's node running throughout: slices of the
/// measurement are taken in turn, one side first then the other (ABBA), so
/// that whatever else the machine does meanwhile falls on both alike. A
/// p99 of a few thousand pickups measured minutes apart swung either way
/// (tools/bench/BENCH.md). A slice on each side goes first untimed: a node
/// just started plans its claims at their first runs. Answers the history's
/// side, then the empty one.
std::pair<latency_run, latency_run> pickup_side_by_side(db::connection& full, db::connection& empty,
                                                        const history_plan& plan, int run_index) {
  std::vector<double> full_ms, empty_ms;
  pace slice{plan.latency_seconds / pickup_slices, plan.latency_rate};
  for (auto* side : {&empty, &full}) inproc_pickup_times(*side, slice, -1 - run_index);
  for (int s = 0; s < pickup_slices; ++s)
    for (bool on_empty : {s % 2 == 0, s % 2 != 0}) {
      auto ms = inproc_pickup_times(on_empty ? empty : full, slice, run_index * pickup_slices + s);
      auto& into = on_empty ? empty_ms : full_ms;
      into.insert(into.end(), ms.begin(), ms.end());
    }
  return {summary(std::move(full_ms)), summary(std::move(empty_ms))};
}

}  // namespace

phase_report measure_history(const history_plan& plan, const std::string& binary,
                             const std::string& conninfo, db::connection& conn,
                             const announce_fn& announce) {
  // Both nodes run the same types, so that their claims ask alike.
  const std::vector<std::string> types{std::string{"types."} + drain_type + ".executor=noop",
                                       std::string{"types."} + inproc_type + ".executor=noop"};
  bench_node node{binary, conninfo, types, "history"};
  node.start();
  auto finished = short_count(plan.finished_tasks);
  series drain_empty{"tasks/s"}, drain_full{"tasks/s"}, drain_ratio{"ratio"}, p50_empty{"ms"},
      p50_full{"ms"}, p50_ratio{"ratio"}, p99_empty{"ms"}, p99_full{"ms"}, p99_ratio{"ratio"},
      slowest_call_ratio{"ratio"}, stats_first_empty{"ms"}, stats_first_full{"ms"};
  std::vector<series> call_empty(api_calls.size(), series{"ms"}),
      call_full(api_calls.size(), series{"ms"});
  run(conn, sql::reset_tasks);
  std::vector<table_figures> empty;
  for (int r = 0; r < plan.runs; ++r) {
    announce("drain and API calls on an empty table", r, node.peak_rss());
    empty.push_back(measure_table(node, conn, plan, "e" + std::to_string(r)));
  }
  progress("loading " + std::to_string(plan.finished_tasks) + " finished tasks and " +
           std::to_string(history_days) + " days' tables of stopped tasks");
  auto start = steady::now();
  run(conn, sql::make_past_days, {std::to_string(history_days)});
  // In statements of 10M at most, each well within the bench's statement
  // timeout (10 minutes).
  constexpr int64_t per_statement = 10'000'000;
  for (int64_t loaded = 0; loaded < plan.finished_tasks; loaded += per_statement)
    run(conn, sql::load_history,
        {std::string{history_type},
         std::to_string(std::min<int64_t>(per_statement, plan.finished_tasks - loaded)),
         std::to_string(loaded), std::to_string(plan.finished_tasks)});
  // As autovacuum would have by the time a table holds that history.
  run(conn, sql::vacuum_tasks);
  progress("  loaded and vacuumed in " + fixed(seconds_since(start), 1) + " s");
  bench_database beside{conninfo, false, "bench_empty"};
  bench_node beside_node{binary, beside.conninfo(), types, "history-empty"};
  auto beside_conn = connect(beside.conninfo());
  for (int r = 0; r < plan.runs; ++r) {
    announce("the same beside " + finished + " finished tasks", r, node.peak_rss());
    auto full = measure_table(node, conn, plan, "f" + std::to_string(r));
    const auto& before = empty[static_cast<size_t>(r)];
    drain_empty.runs.push_back(before.drain);
    drain_full.runs.push_back(full.drain);
    drain_ratio.runs.push_back(full.drain / before.drain);
    progress("  pickup beside them and on an empty database, in turn");
    // Its node runs only now: an idle node would weigh on the drain and the
    // calls, which the empty table had without it.
    beside_node.start();
    // Its node made the schema; its tables are vacuumed and get statistics
    // as the history's do before each run.
    run(beside_conn, sql::vacuum_live_tasks);
    run(beside_conn, sql::analyze_tasks);
    auto [pickup_full, pickup_empty] = pickup_side_by_side(conn, beside_conn, plan, r);
    beside_node.stop();
    p50_empty.runs.push_back(pickup_empty.p50);
    p50_full.runs.push_back(pickup_full.p50);
    p50_ratio.runs.push_back(pickup_full.p50 / pickup_empty.p50);
    p99_empty.runs.push_back(pickup_empty.p99);
    p99_full.runs.push_back(pickup_full.p99);
    p99_ratio.runs.push_back(pickup_full.p99 / pickup_empty.p99);
    double slowest = 0;
    for (size_t i = 0; i < api_calls.size(); ++i) {
      call_empty[i].runs.push_back(before.call_ms[i]);
      call_full[i].runs.push_back(full.call_ms[i]);
      slowest = std::max(slowest, full.call_ms[i] / before.call_ms[i]);
    }
    slowest_call_ratio.runs.push_back(slowest);
    stats_first_empty.runs.push_back(before.stats_first_ms);
    stats_first_full.runs.push_back(full.stats_first_ms);
  }
  node.stop();
  run(conn, sql::reset_tasks);

  phase_report report;
  report.peak_rss = node.peak_rss();
  auto drains = short_count(plan.drain_tasks);
  report.rows = {
      {"drain: " + drains + ", empty table", drain_empty},
      {"  drain beside " + finished + " finished", drain_full},
      {"  that drain / on the empty table", drain_ratio},
      {"  pickup p50 (in-process), empty database", p50_empty},
      {"  pickup p50 beside " + finished + " finished", p50_full},
      {"  pickup p99 (in-process), empty database", p99_empty},
      {"  pickup p99 beside " + finished + " finished", p99_full},
  };
  for (size_t i = 0; i < api_calls.size(); ++i) {
    report.rows.push_back({"  GET " + api_calls[i] + ", empty table", call_empty[i]});
    report.rows.push_back({"    " + api_calls[i] + " beside " + finished, call_full[i]});
  }
  report.rows.push_back({"  slowest API call's time beside them / empty", slowest_call_ratio});
  report.rows.push_back({"  GET /v1/stats, first call, empty table", stats_first_empty});
  report.rows.push_back({"    its first call beside " + finished, stats_first_full});
  report.targets = {
      {"drain beside " + finished + " finished >= 1/1.2 of empty", drain_ratio, ">=", 1 / 1.2},
      {"pickup p50 beside them <= 1.2x empty", p50_ratio, "<=", 1.2},
      {"pickup p99 beside them <= 1.2x empty", p99_ratio, "<=", 1.2},
      {"every API call beside them <= 1.2x empty", slowest_call_ratio, "<=", 1.2},
  };
  return report;
}

}  // namespace taskmill::bench
