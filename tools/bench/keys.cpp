#include "tools/bench/keys.hpp"

#include <algorithm>

namespace taskmill::bench {
namespace {

constexpr const char* keyed_type = "BENCH_KEYED";
/// The same tasks, their type without keys.
constexpr const char* plain_type = "BENCH_UNKEYED";
constexpr const char* key_space = "bench_tenants";

/// `tasks` due tasks of `type` over `keys` tenants and all five levels,
/// keyed or not; drained by `node`.
double keyed_drain(bench_node& node, db::connection& conn, const char* type, bool keyed,
                   const keys_plan& plan, int run_index) {
  return profiled_drain(
             node, conn, {type}, plan.tasks,
             [&] {
               run(conn, sql::reset_tasks);
               run(conn, sql::load_keyed_backlog,
                   {std::string{type}, std::to_string(plan.tasks),
                    "k" + std::to_string(run_index) + "-",
                    keyed ? db::param{key_space} : db::param{}, std::to_string(plan.keys)});
             })
      .rate;
}

}  // namespace

phase_report measure_keys(const keys_plan& plan, const std::string& binary,
                          const std::string& conninfo, db::connection& conn,
                          const announce_fn& announce) {
  bench_node plain{
      binary, conninfo, {std::string{"types."} + plain_type + ".executor=noop"}, "unkeyed"};
  bench_node keyed{
      binary,
      conninfo,
      {std::string{"types."} + keyed_type + ".executor=noop",
       std::string{"types."} + keyed_type + ".key_space=" + key_space,
       std::string{"types."} + keyed_type + ".key_path=$.tenant",
       std::string{"key_spaces."} + key_space + ".limit=" + std::to_string(plan.key_limit)},
      "keyed"};
  // Its first start writes the type's keys; the drains then find them so.
  keyed.start();
  keyed.stop();
  series without{"tasks/s"}, with{"tasks/s"}, ratio{"ratio"};
  auto peak_rss = [&] { return std::max(plain.peak_rss(), keyed.peak_rss()); };
  time_function_calls(conn, true);
  auto over = short_count(plan.tasks) + " over " + short_count(plan.keys) + " keys";
  for (int r = 0; r < plan.runs; ++r) {
    announce("drain of " + over + ", without keys", r, peak_rss());
    without.runs.push_back(keyed_drain(plain, conn, plain_type, false, plan, r));
    announce("the same drain, each key limited to " + std::to_string(plan.key_limit), r,
             peak_rss());
    with.runs.push_back(keyed_drain(keyed, conn, keyed_type, true, plan, r));
    ratio.runs.push_back(with.runs.back() / without.runs.back());
  }
  phase_report out;
  out.rows = {{"drain: " + over + ", without keys", without},
              {"  the same, " + std::to_string(plan.key_limit) + " running a key", with},
              {"  keyed drain / without keys", ratio}};
  out.targets = {{"keyed limits cost <= 15% (keyed / without)", ratio, ">=", 0.85}};
  out.peak_rss = peak_rss();
  return out;
}

}  // namespace taskmill::bench
