#pragma once

// The bench's measurements of dependencies and of running tasks talking
// back: a chain, a fan-out and fan-in, progress reports at scale.

#include "tools/bench/harness.hpp"

namespace taskmill::bench {

/// Run by the sleep executor: tasks that report progress while they run.
constexpr const char* talking_type = "BENCH_TALK";

/// Per step of a chain of `steps` tasks of `type`, each after the one
/// before, in ms.
double chain_step_ms(bench_node& node, db::connection& conn, const char* type, int steps);

struct progress_run {
  double reports_per_s;     // progress calls answered
  double statements_per_s;  // calls of taskmill.report_progress storing them
};

/// `tasks` running tasks each report progress every 100 ms through the API,
/// each on a keep-alive connection of its own (a report is answered once
/// stored), for `seconds`; the statements that store them are counted by
/// PostgreSQL's function statistics, sampled twice within the load (a busy
/// session's counts reach them within a second, so both samples lag alike).
progress_run progress_reports(bench_node& node, db::connection& conn, const std::string& conninfo,
                              int tasks, double seconds);

struct fan_run {
  double submit_s;   // the graph's submit, in one transaction
  double fan_out_s;  // the root's finish to the children's last
  double fan_in_ms;  // the children's last finish to the fan-in task's start
};

/// A root, `children` tasks of `type` after it, and one task after them all.
fan_run fan_out_and_in(bench_node& node, db::connection& conn, const char* type, int children);

}  // namespace taskmill::bench
