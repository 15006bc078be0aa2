#include "tools/bench/limits.hpp"

#include "actors/limiter.hpp"

#include <algorithm>
#include <functional>
#include <map>
#include <optional>

namespace taskmill::bench {
namespace {

/// The three types of the limits measurement.
const type_list mixed_types{"BENCH_MIX_A", "BENCH_MIX_B", "BENCH_MIX_C"};
/// The nine types without a limit and the one limited to 5 of the uneven
/// measurement.
const type_list even_types{"BENCH_EVEN_1", "BENCH_EVEN_2", "BENCH_EVEN_3",
                           "BENCH_EVEN_4", "BENCH_EVEN_5", "BENCH_EVEN_6",
                           "BENCH_EVEN_7", "BENCH_EVEN_8", "BENCH_EVEN_9"};
const char* const held_type = "BENCH_HELD";

/// Run beside the limited types by one of the limited nodes; none of its
/// tasks is due.
constexpr const char* beside_type = "BENCH_MIX_OTHER";
/// Due before the mixed drain's tasks, at every level; no node runs them.
constexpr const char* stranded_type = "BENCH_STRANDED";

/// Whether a mixed drain has, beside its own, as many due tasks of a type
/// that no node runs, older than the drain's own at every level.
enum class stranded_backlog { none, beside };

/// Running limits on the mixed drain: a global one and one for each type.
struct mixed_limits {
  int global;
  int each_type;
};
/// The limits measured: the 900 tasks they let run at once are fewer than
/// the drain holds without them.
constexpr mixed_limits binding_limits{1000, 300};
/// Limits above what the drain holds without them: what counting them costs
/// the claims and outcomes, apart from what holding the drain to them does.
constexpr mixed_limits loose_limits{3000, 1000};

/// `limits` as the rows and the progress name them.
std::string named(const mixed_limits& limits) {
  return "global " + std::to_string(limits.global) + ", type limits " +
         std::to_string(limits.each_type);
}

/// How many tasks of the mixed types `limits` let run at once, by the
/// limiter's own rule.
int64_t most_running(const mixed_limits& limits) {
  limiter_options options;
  options.global_limit = limits.global;
  options.types = mixed_types;
  for (const auto& t : mixed_types) options.type_limits[t] = limits.each_type;
  return most_running_under_limits(options, {}).value_or(0);
}

/// Config overrides: the mixed types run by the noop executor, with
/// `limits` or without, and another type besides (none of its tasks due)
/// or not.
std::vector<std::string> mixed_node_types(std::optional<mixed_limits> limits,
                                          bool another_type = false) {
  std::vector<std::string> out;
  for (const auto& t : mixed_types) {
    out.push_back("types." + t + ".executor=noop");
    if (limits) out.push_back("types." + t + ".running_limit=" + std::to_string(limits->each_type));
  }
  if (limits) out.push_back("scheduling.global_limit=" + std::to_string(limits->global));
  if (another_type) out.push_back(std::string{"types."} + beside_type + ".executor=noop");
  return out;
}

/// Config overrides: the even types and the held type, limited to 5, run by
/// the noop executor.
std::vector<std::string> uneven_node_types() {
  std::vector<std::string> out;
  for (const auto& t : even_types) out.push_back("types." + t + ".executor=noop");
  out.push_back(std::string{"types."} + held_type + ".executor=noop");
  out.push_back(std::string{"types."} + held_type + ".running_limit=5");
  return out;
}

/// `tasks` due tasks over the three mixed types and all five priorities.
drain_run mixed_drain(bench_node& node, db::connection& conn, int tasks, int run_index,
                      stranded_backlog stranded = stranded_backlog::none) {
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

/// `tasks` due tasks over the even types and all five priorities, beside
/// `held` due tasks of the held type older than them at every level: how
/// the even types' tasks drain.
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

/// The drains with and without limits over one backlog.
struct limits_series {
  series unlimited{"tasks/s"};
  series limited{"tasks/s"};
  series ratio{"ratio"};
  series beside{"tasks/s"};
  series beside_ratio{"ratio"};
  series loose{"tasks/s"};
  series loose_ratio{"ratio"};
  /// Tasks claimed and not yet stored, on average (drain_run::tasks_held).
  series unlimited_held{"tasks"};
  series limited_held{"tasks"};
  series beside_held{"tasks"};
  /// Per task: in PostgreSQL's claim function, and the node's processor.
  series unlimited_claim_us{"us"};
  series limited_claim_us{"us"};
  series unlimited_node_us{"us"};
  series limited_node_us{"us"};
};

}  // namespace

phase_report measure_limits(const limits_plan& plan, const std::string& binary,
                            const std::string& conninfo, db::connection& conn,
                            const announce_fn& announce) {
  bench_node unlimited{binary, conninfo, mixed_node_types(std::nullopt), "unlimited"};
  bench_node limited{binary, conninfo, mixed_node_types(binding_limits), "limited"};
  bench_node limited_beside{binary, conninfo, mixed_node_types(binding_limits, true),
                            "limited-beside"};
  bench_node loosely_limited{binary, conninfo, mixed_node_types(loose_limits), "loosely-limited"};
  bench_node uneven{binary, conninfo, uneven_node_types(), "uneven"};
  auto peak_rss = [&] {
    return std::max({unlimited.peak_rss(), limited.peak_rss(), limited_beside.peak_rss(),
                     loosely_limited.peak_rss(), uneven.peak_rss()});
  };
  auto runs = [&](const std::string& what, int r) { announce(what, r, peak_rss()); };
  std::map<int, limits_series> at_size;
  series stranded{"tasks/s"}, stranded_ratio{"ratio"}, even_alone{"tasks/s"},
      even_beside_held{"tasks/s"}, uneven_ratio{"ratio"}, drift{"ratio"};
  auto first = plan.backlogs.front();
  time_function_calls(conn, true);
  for (int r = 0; r < plan.runs; ++r) {
    for (int backlog : plan.backlogs) {
      auto& at = at_size[backlog];
      drain_run plain{}, capped{}, loose{}, beside{};
      std::vector<std::function<void()>> drains{
          [&] {
            runs("drain of " + std::to_string(backlog) + ", 3 types x 5 priorities, no limits", r);
            plain = mixed_drain(unlimited, conn, backlog, r);
          },
          [&] {
            runs("the same drain with limits: " + named(binding_limits), r);
            capped = mixed_drain(limited, conn, backlog, r);
          },
          [&] {
            runs("the same drain with limits: " + named(loose_limits), r);
            loose = mixed_drain(loosely_limited, conn, backlog, r);
          },
          [&] {
            runs("the same limited drain on a node that runs another type too", r);
            beside = mixed_drain(limited_beside, conn, backlog, r);
          }};
      // Every other run takes them in the opposite order, lest the ratios
      // take the server's drift in one direction.
      if (r % 2 == 1) std::reverse(drains.begin(), drains.end());
      for (const auto& drain : drains) drain();
      at.unlimited.runs.push_back(plain.rate);
      at.unlimited_claim_us.runs.push_back(plain.claim_us_per_task);
      at.unlimited_node_us.runs.push_back(plain.node_us_per_task);
      at.unlimited_held.runs.push_back(plain.tasks_held);
      at.limited.runs.push_back(capped.rate);
      at.limited_claim_us.runs.push_back(capped.claim_us_per_task);
      at.limited_node_us.runs.push_back(capped.node_us_per_task);
      at.limited_held.runs.push_back(capped.tasks_held);
      at.ratio.runs.push_back(capped.rate / plain.rate);
      at.loose.runs.push_back(loose.rate);
      at.loose_ratio.runs.push_back(loose.rate / plain.rate);
      at.beside.runs.push_back(beside.rate);
      at.beside_held.runs.push_back(beside.tasks_held);
      at.beside_ratio.runs.push_back(beside.rate / plain.rate);
    }
    runs("the unlimited drain beside as many due tasks of a type no node runs", r);
    stranded.runs.push_back(mixed_drain(unlimited, conn, first, r, stranded_backlog::beside).rate);
    stranded_ratio.runs.push_back(stranded.runs.back() / at_size[first].unlimited.runs[r]);
    runs("drain of " + std::to_string(plan.even_tasks) + " over 9 types without a limit", r);
    even_alone.runs.push_back(uneven_drain(uneven, conn, plan.even_tasks, 0, r).rate);
    runs("the same beside " + std::to_string(plan.held_tasks) + " due of a type limited to 5", r);
    even_beside_held.runs.push_back(
        uneven_drain(uneven, conn, plan.even_tasks, plan.held_tasks, r).rate);
    uneven_ratio.runs.push_back(even_beside_held.runs.back() / even_alone.runs.back());
    if (plan.backlogs.size() > 1)
      drift.runs.push_back(
          std::abs(at_size[plan.backlogs.back()].ratio.runs[r] - at_size[first].ratio.runs[r]));
  }
  time_function_calls(conn, false);

  phase_report out;
  for (const auto& [backlog, at] : at_size) {
    auto due = short_count(backlog);
    out.rows.insert(
        out.rows.end(),
        // Each name says its backlog: the report is keyed by name.
        {{"drain: " + due + ", 3 types x 5 priorities", at.unlimited},
         {"  the same with " + named(binding_limits) + ", " + due, at.limited},
         {"  drain with limits / without, " + due, at.ratio},
         {"  the same, the node running another type too, " + due, at.beside},
         {"  that drain / without limits, " + due, at.beside_ratio},
         {"  claim in PostgreSQL per task, no limits, " + due, at.unlimited_claim_us},
         {"  claim in PostgreSQL per task, limits, " + due, at.limited_claim_us},
         {"  node processor per task, no limits, " + due, at.unlimited_node_us},
         {"  node processor per task, limits, " + due, at.limited_node_us},
         {"  tasks held (claimed, not stored), no limits, " + due, at.unlimited_held},
         {"  tasks held, limits (" + std::to_string(most_running(binding_limits)) + " may run), " +
              due,
          at.limited_held},
         {"  tasks held, limits, the node running another type too, " + due, at.beside_held},
         {"  the same with " + named(loose_limits) + ", " + due, at.loose},
         {"  loose limits / without, " + due, at.loose_ratio}});
    out.targets.push_back(
        {"limits cost <= 10% at " + due + " (with / without)", at.ratio, ">=", 0.9});
    out.targets.push_back(
        {"  the same, node running another type too, " + due, at.beside_ratio, ">=", 0.9});
    out.targets.push_back(
        {"  limits above what the drain holds, " + due, at.loose_ratio, ">=", 0.9});
  }
  auto first_due = short_count(first);
  out.rows.insert(
      out.rows.end(),
      {{"limits ratio at " + short_count(plan.backlogs.back()) + " less at " + first_due, drift},
       {"unlimited, beside " + first_due + " due that no node runs", stranded},
       {"that drain / without them", stranded_ratio},
       {"drain: " + short_count(plan.even_tasks) + " over 9 types without a limit", even_alone},
       {"  the same beside " + short_count(plan.held_tasks) + " due of a type limited to 5",
        even_beside_held},
       {"  that drain / alone", uneven_ratio}});
  out.targets.insert(out.targets.end(),
                     {{"beside a type held to 5 >= 90% of alone", uneven_ratio, ">=", 0.9},
                      {"limits ratio drift from the smallest backlog", drift, "<=", 0.05},
                      {"beside due tasks no node runs >= 60%", stranded_ratio, ">=", 0.6}});
  out.peak_rss = peak_rss();
  return out;
}

}  // namespace taskmill::bench
