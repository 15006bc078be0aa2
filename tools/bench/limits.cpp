#include "tools/bench/limits.hpp"

#include <algorithm>
#include <functional>
#include <map>

namespace taskmill::bench {

const type_list mixed_types{"BENCH_MIX_A", "BENCH_MIX_B", "BENCH_MIX_C"};
const type_list even_types{"BENCH_EVEN_1", "BENCH_EVEN_2", "BENCH_EVEN_3",
                           "BENCH_EVEN_4", "BENCH_EVEN_5", "BENCH_EVEN_6",
                           "BENCH_EVEN_7", "BENCH_EVEN_8", "BENCH_EVEN_9"};
const char* const held_type = "BENCH_HELD";

namespace {

/// Run beside the limited types by one of the limited nodes; none of its
/// tasks is due.
constexpr const char* beside_type = "BENCH_MIX_OTHER";
/// Due before the mixed drain's tasks, at every level; no node runs them.
constexpr const char* stranded_type = "BENCH_STRANDED";

}  // namespace

std::vector<std::string> mixed_node_types(bool limited, bool another_type) {
  std::vector<std::string> out;
  for (const auto& t : mixed_types) {
    out.push_back("types." + t + ".executor=noop");
    if (limited) out.push_back("types." + t + ".running_limit=300");
  }
  if (limited) out.push_back("scheduling.global_limit=1000");
  if (another_type) out.push_back(std::string{"types."} + beside_type + ".executor=noop");
  return out;
}

std::vector<std::string> uneven_node_types() {
  std::vector<std::string> out;
  for (const auto& t : even_types) out.push_back("types." + t + ".executor=noop");
  out.push_back(std::string{"types."} + held_type + ".executor=noop");
  out.push_back(std::string{"types."} + held_type + ".running_limit=5");
  return out;
}

namespace {

struct function_time {
  int64_t calls = 0;
  double total_ms = 0;
  double self_ms = 0;
};

std::map<std::string, function_time> function_times(db::connection& conn) {
  std::map<std::string, function_time> out;
  auto res = run(conn, sql::claim_function_times);
  for (int i = 0; i < res.rows(); ++i)
    out[res.string(i, 0)] = {res.int64(i, 1), res.float64(i, 2), res.float64(i, 3)};
  return out;
}

}  // namespace

void time_function_calls(db::connection& conn, bool on) {
  run(conn, on ? sql::track_function_calls : sql::untrack_function_calls);
  run(conn, sql::reload_configuration);
}

namespace {

/// drain_rate, and where the claims spent their time.
drain_run profiled_drain(bench_node& node, db::connection& conn, const type_list& types, int tasks,
                         const std::function<void()>& load) {
  auto before = function_times(conn);
  drain_run out{};
  out.rate = drain_rate(node, conn, types, tasks, load);
  // A stopped node's sessions report their counts as they exit, a moment
  // after the node: read earlier, a drain's counts went to the next one's.
  sleep_checked(milliseconds{300});
  auto after = function_times(conn);
  auto delta = [&](const std::string& name) {
    auto a = after[name];
    auto b = before[name];
    return function_time{a.calls - b.calls, a.total_ms - b.total_ms, a.self_ms - b.self_ms};
  };
  auto claims = delta("claim_by_turns");
  out.claim_us_per_task = claims.total_ms * 1000.0 / tasks;
  out.tasks_per_claim = claims.calls > 0 ? static_cast<double>(tasks) / claims.calls : 0;
  out.node_us_per_task = node.last_cpu_seconds() * 1e6 / tasks;
  std::vector<std::pair<double, std::string>> heaviest;
  for (const auto& [name, t] : after)
    if (auto d = delta(name); d.self_ms > 0) heaviest.emplace_back(d.self_ms, name);
  std::sort(heaviest.rbegin(), heaviest.rend());
  std::string line = "  claims: " + fixed(out.claim_us_per_task, 1) + " us a task, " +
                     fixed(out.tasks_per_claim, 1) + " tasks a claim; node " +
                     fixed(out.node_us_per_task, 1) + " us a task; most time in itself:";
  for (size_t i = 0; i < std::min<size_t>(heaviest.size(), 8); ++i)
    line += " " + heaviest[i].second + " " + fixed(heaviest[i].first * 1000.0 / tasks, 1);
  progress(line);
  return out;
}

}  // namespace

drain_run mixed_drain(bench_node& node, db::connection& conn, int tasks, int run_index,
                      stranded_backlog stranded) {
  return profiled_drain(node, conn, mixed_types, tasks, [&] {
    run(conn, sql::reset_tasks);
    if (stranded == stranded_backlog::beside)
      run(conn, sql::load_mixed_backlog,
          {types_param({stranded_type}), std::to_string(tasks),
           "x" + std::to_string(run_index) + "-"});
    run(conn, sql::load_mixed_backlog,
        {types_param(mixed_types), std::to_string(tasks), "m" + std::to_string(run_index) + "-"});
  });
}

drain_run uneven_drain(bench_node& node, db::connection& conn, int tasks, int held, int run_index) {
  return profiled_drain(node, conn, even_types, tasks, [&] {
    run(conn, sql::reset_tasks);
    if (held > 0)
      run(conn, sql::load_mixed_backlog,
          {types_param({held_type}), std::to_string(held), "h" + std::to_string(run_index) + "-"});
    run(conn, sql::load_mixed_backlog,
        {types_param(even_types), std::to_string(tasks), "e" + std::to_string(run_index) + "-"});
  });
}

}  // namespace taskmill::bench
