#include "tools/bench/purge.hpp"

#include "config/config.hpp"
#include "messages/errors.hpp"
#include "storage/bench/bench_sql.hpp"

namespace taskmill::bench {
namespace {

constexpr const char* purge_type = "BENCH_PURGE";
/// The watcher's default purge retention, a week, in ms.
constexpr const char* retention_ms = "604800000";
/// When the purged tasks stopped: a day wholly past that retention.
constexpr int stopped_days_ago = 10;

struct purge_figures {
  double seconds = 0;
  double wal_mb = 0;
  /// The vacuum after it, which the rows it deleted cost.
  double vacuum_seconds = 0;
  double vacuum_wal_mb = 0;
};

/// One kind of purge's figures over the runs.
struct purge_series {
  series seconds{"s"}, wal_mb{"MB"}, vacuum_seconds{"s"}, vacuum_wal_mb{"MB"};

  void add(const purge_figures& f) {
    seconds.runs.push_back(f.seconds);
    wal_mb.runs.push_back(f.wal_mb);
    vacuum_seconds.runs.push_back(f.vacuum_seconds);
    vacuum_wal_mb.runs.push_back(f.vacuum_wal_mb);
  }
};

double wal_mb_since(db::connection& conn, const std::string& position) {
  return static_cast<double>(run(conn, sql::wal_since, {position}).int64(0, 0)) / (1 << 20);
}

/// Loads `plan.tasks` tasks stopped `stopped_days_ago` days ago (that day's
/// table made first if `of_a_day`), then purges them to the last.
purge_figures purge_once(db::connection& conn, const purge_plan& plan, bool of_a_day,
                         const std::string& term, const std::string& label) {
  auto days_ago = std::to_string(stopped_days_ago);
  run(conn, sql::reset_tasks);
  if (of_a_day) run(conn, sql::make_stopped_day, {days_ago});
  run(conn, sql::load_stopped,
      {std::string{purge_type}, std::to_string(plan.tasks), label, days_ago});
  run(conn, sql::vacuum_tasks);
  // From a checkpoint, so that both purges pay the same first page images.
  if (auto done = conn.exec(sql::checkpoint); !done)
    progress("  no CHECKPOINT (" + error_message(done.error()) + ")");
  auto batch = std::to_string(config{}.watcher.batch_size);
  auto wal_at = run(conn, sql::wal_position).string(0, 0);
  auto start = steady::now();
  while (run(conn, sql::purge_sweep, {retention_ms, batch, term}).int64(0, 0) > 0)
    check_interrupted();
  purge_figures f;
  f.seconds = seconds_since(start);
  f.wal_mb = wal_mb_since(conn, wal_at);
  wal_at = run(conn, sql::wal_position).string(0, 0);
  start = steady::now();
  run(conn, sql::vacuum_tasks);
  f.vacuum_seconds = seconds_since(start);
  f.vacuum_wal_mb = wal_mb_since(conn, wal_at);
  if (auto left = count_tasks(conn, {purge_type}).all; left > 0)
    throw bench_failure{"purge: " + std::to_string(left) + " stopped tasks were left"};
  return f;
}

}  // namespace

phase_report measure_purge(const purge_plan& plan, db::connection& conn,
                           const announce_fn& announce) {
  auto tasks = short_count(plan.tasks);
  purge_series of_a_day, row_by_row;
  series time_ratio{"ratio"}, wal_ratio{"ratio"};
  // Where a release keeps no days, both are purged row by row.
  auto days = run(conn, sql::keeps_stopped_days).string(0, 0) == "t";
  // The bench sweeps as the leader would (no node runs meanwhile).
  auto term = run(conn, sql::seize_lead).string(0, 0);
  for (int r = 0; r < plan.runs; ++r) {
    announce("purge of " + tasks + " stopped tasks of a day", r, 0);
    auto day = purge_once(conn, plan, days, term, "d" + std::to_string(r) + "-");
    announce("purge of " + tasks + " stopped tasks without a day", r, 0);
    auto rows = purge_once(conn, plan, false, term, "r" + std::to_string(r) + "-");
    of_a_day.add(day);
    row_by_row.add(rows);
    time_ratio.runs.push_back((day.seconds + day.vacuum_seconds) /
                              (rows.seconds + rows.vacuum_seconds));
    wal_ratio.runs.push_back((day.wal_mb + day.vacuum_wal_mb) / (rows.wal_mb + rows.vacuum_wal_mb));
  }
  run(conn, sql::give_up_lead);
  run(conn, sql::reset_tasks);
  phase_report report;
  report.rows = {
      {"purge: " + tasks + " stopped tasks of a day, time", of_a_day.seconds},
      {"  WAL written by that purge", of_a_day.wal_mb},
      {"  the vacuum after it, time", of_a_day.vacuum_seconds},
      {"  the vacuum after it, WAL", of_a_day.vacuum_wal_mb},
      {"  the same stopped without a day (row by row), time", row_by_row.seconds},
      {"  WAL written row by row", row_by_row.wal_mb},
      {"  the vacuum after the rows, time", row_by_row.vacuum_seconds},
      {"  the vacuum after the rows, WAL", row_by_row.vacuum_wal_mb},
      {"  a day's purge / row by row, with vacuums: time", time_ratio},
      {"  a day's purge / row by row, with vacuums: WAL", wal_ratio},
  };
  return report;
}

}  // namespace taskmill::bench
