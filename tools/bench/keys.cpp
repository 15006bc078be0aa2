#include "tools/bench/keys.hpp"

#include "tools/percentile.hpp"

#include <algorithm>
#include <random>
#include <thread>

namespace taskmill::bench {
namespace {

constexpr const char* keyed_type = "BENCH_KEYED";
constexpr const char* key_space = "bench_tenants";
/// The same, with a rate per key that the drain stays within.
constexpr const char* rated_type = "BENCH_RATED";
constexpr const char* rated_space = "bench_rated";
/// The same tasks, their type without keys.
constexpr const char* plain_type = "BENCH_UNKEYED";
/// The same, keyed without a limit any key reaches: the keys' turns alone.
constexpr const char* open_type = "BENCH_OPEN";
constexpr const char* open_space = "bench_open";

/// `tasks` due tasks of `type` over `keys` tenants and all five levels,
/// keyed in `space` (none: not keyed); drained by `node`.
double keyed_drain(bench_node& node, db::connection& conn, const char* type, const char* space,
                   const keys_plan& plan, int run_index) {
  return profiled_drain(node, conn, {type}, plan.tasks,
                        [&] {
                          run(conn, sql::reset_tasks);
                          run(conn, sql::load_keyed_backlog,
                              {std::string{type}, std::to_string(plan.tasks),
                               "k" + std::to_string(run_index) + "-",
                               space ? db::param{space} : db::param{}, std::to_string(plan.keys)});
                        })
      .rate;
}

/// A node (`role`) running `type` keyed in `space`, each key limited to
/// `limit`, with `more` settings of the space.
bench_node keyed_node(const std::string& binary, const std::string& conninfo,
                      const std::string& role, const char* type, const char* space, int limit,
                      const std::vector<std::string>& more) {
  std::vector<std::string> settings{
      std::string{"types."} + type + ".executor=noop",
      std::string{"types."} + type + ".key_space=" + space,
      std::string{"types."} + type + ".key_path=$.tenant",
      std::string{"key_spaces."} + space + ".limit=" + std::to_string(limit)};
  for (const auto& m : more) settings.push_back(std::string{"key_spaces."} + space + "." + m);
  return {binary, conninfo, settings, role};
}

/// The p99 pickup latency (ms, created to started, by the database clock)
/// of `plan.small_keys` keys' tasks, one each, submitted one statement each
/// at random times over `plan.fair_seconds`, beside a backlog of
/// `big_backlog` tasks of one key (0: alone). `node` runs the keyed type.
double small_keys_p99(bench_node& node, db::connection& conn, const keys_plan& plan,
                      int big_backlog, int run_index) {
  run(conn, sql::reset_tasks);
  auto big = "big" + std::to_string(run_index) + "-";
  if (big_backlog > 0)
    run(conn, sql::load_keyed_backlog,
        {std::string{keyed_type}, std::to_string(big_backlog), big, db::param{key_space}, "1"});
  std::mt19937 rng{static_cast<unsigned>(run_index)};
  std::uniform_real_distribution<double> at(0, plan.fair_seconds);
  std::vector<double> offsets(plan.small_keys);
  for (auto& o : offsets) o = at(rng);
  std::sort(offsets.begin(), offsets.end());
  auto prefix = "small" + std::to_string(run_index) + (big_backlog > 0 ? "b-" : "a-");
  node.start();
  auto start = steady::now();
  for (int i = 0; i < plan.small_keys; ++i) {
    check_interrupted();
    std::this_thread::sleep_until(start + std::chrono::duration_cast<steady::duration>(
                                              std::chrono::duration<double>{offsets[i]}));
    run(conn, sql::submit_for_tenant,
        {std::string{keyed_type}, prefix + std::to_string(i), "s" + std::to_string(i)});
  }
  if (big_backlog > 0 && run(conn, sql::waiting_by_prefix, {big}).int64(0, 0) == 0)
    throw bench_failure{
        "fairness: the big key's backlog ran out before the small keys' last "
        "submit; it measures nothing"};
  std::vector<double> ms;
  auto deadline = steady::now() + std::chrono::seconds{60};
  for (;;) {
    auto res = run(conn, sql::pickup_by_prefix, {prefix});
    if (res.rows() == plan.small_keys) {
      for (int r = 0; r < res.rows(); ++r) ms.push_back(res.float64(r, 0));
      break;
    }
    if (steady::now() > deadline)
      throw bench_failure{"fairness: " + std::to_string(res.rows()) + " of " +
                          std::to_string(plan.small_keys) +
                          " small keys' tasks started within 60 s"};
    sleep_checked(milliseconds{50});
  }
  node.stop();
  std::sort(ms.begin(), ms.end());
  return percentile(ms, 0.99);
}

}  // namespace

phase_report measure_keys(const keys_plan& plan, const std::string& binary,
                          const std::string& conninfo, db::connection& conn,
                          const announce_fn& announce) {
  bench_node plain{
      binary, conninfo, {std::string{"types."} + plain_type + ".executor=noop"}, "unkeyed"};
  // No key holds more tasks than the whole backlog.
  auto open = keyed_node(binary, conninfo, "open", open_type, open_space, plan.tasks, {});
  auto keyed = keyed_node(binary, conninfo, "keyed", keyed_type, key_space, plan.key_limit, {});
  // A rate of 100 starts a second a key, which a key's few tasks never reach.
  auto rated = keyed_node(binary, conninfo, "rated", rated_type, rated_space, plan.key_limit,
                          {"rate=100", "period=1s"});
  // Their first starts write the types' keys; the drains then find them so.
  for (auto* node : {&open, &keyed, &rated}) {
    node->start();
    node->stop();
  }
  series without{"tasks/s"}, turns{"tasks/s"}, with{"tasks/s"}, with_rate{"tasks/s"},
      turns_ratio{"ratio"}, ratio{"ratio"}, rate_ratio{"ratio"}, keyed_ratio{"ratio"};
  auto peak_rss = [&] {
    return std::max({plain.peak_rss(), open.peak_rss(), keyed.peak_rss(), rated.peak_rss()});
  };
  time_function_calls(conn, true);
  auto over = short_count(plan.tasks) + " over " + short_count(plan.keys) + " keys";
  for (int r = 0; r < plan.runs; ++r) {
    announce("drain of " + over + ", without keys", r, peak_rss());
    without.runs.push_back(keyed_drain(plain, conn, plain_type, nullptr, plan, r));
    announce("the same drain by keys' turns, unlimited", r, peak_rss());
    turns.runs.push_back(keyed_drain(open, conn, open_type, open_space, plan, r));
    turns_ratio.runs.push_back(turns.runs.back() / without.runs.back());
    announce("the same, each key limited to " + std::to_string(plan.key_limit), r, peak_rss());
    with.runs.push_back(keyed_drain(keyed, conn, keyed_type, key_space, plan, r));
    ratio.runs.push_back(with.runs.back() / turns.runs.back());
    keyed_ratio.runs.push_back(with.runs.back() / without.runs.back());
    announce("the same, with a rate per key", r, peak_rss());
    with_rate.runs.push_back(keyed_drain(rated, conn, rated_type, rated_space, plan, r));
    rate_ratio.runs.push_back(with_rate.runs.back() / turns.runs.back());
  }
  time_function_calls(conn, false);
  series alone{"ms"}, beside{"ms"}, fair_ratio{"ratio"};
  auto small = short_count(plan.small_keys) + " keys";
  for (int r = 0; r < plan.runs; ++r) {
    announce("pickup of " + small + "' tasks, alone", r, peak_rss());
    alone.runs.push_back(small_keys_p99(keyed, conn, plan, 0, r));
    announce("the same beside one key's " + short_count(plan.big_key_backlog) + " due tasks", r,
             peak_rss());
    beside.runs.push_back(small_keys_p99(keyed, conn, plan, plan.big_key_backlog, r));
    fair_ratio.runs.push_back(beside.runs.back() / alone.runs.back());
  }
  phase_report out;
  out.rows = {{"drain: " + over + ", without keys", without},
              {"  the same by keys' turns, unlimited", turns},
              {"  keys' turns / without keys", turns_ratio},
              {"  the same, " + std::to_string(plan.key_limit) + " running a key", with},
              {"  limited / unlimited", ratio},
              {"  limited / without keys", keyed_ratio},
              {"  the same, and 100 starts a second a key", with_rate},
              {"  limited with a rate / unlimited", rate_ratio},
              {"pickup p99: " + small + ", a task each", alone},
              {"  beside one key's " + short_count(plan.big_key_backlog) + " due", beside},
              {"  beside a big key / alone", fair_ratio}};
  out.targets = {{"keyed limits cost <= 15% (limited / unlimited)", ratio, ">=", 0.85},
                 {"keyed limits and rates cost <= 15%", rate_ratio, ">=", 0.85},
                 {"small keys' p99 beside a big key <= 2x alone", fair_ratio, "<=", 2.0}};
  out.peak_rss = peak_rss();
  return out;
}

}  // namespace taskmill::bench
