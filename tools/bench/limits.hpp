#pragma once

// The bench's measurements of running limits: drains with and without
// them over backlogs of growing size, beside work no node runs, and a type
// held to a small limit among types without one.

#include "tools/bench/harness.hpp"

namespace taskmill::bench {

/// The three types of the limits measurement.
extern const type_list mixed_types;
/// The nine types without a limit and the one limited to 5 of the uneven
/// measurement.
extern const type_list even_types;
extern const char* const held_type;

/// Config overrides: the mixed types run by the noop executor, with a
/// global limit of 1000 and type limits of 300 or without, and another type
/// besides (none of its tasks due) or not.
std::vector<std::string> mixed_node_types(bool limited, bool another_type = false);
/// Config overrides: the even types and the held type, limited to 5, run by
/// the noop executor.
std::vector<std::string> uneven_node_types();

/// Whether a mixed drain has, beside its own, as many due tasks of a type
/// that no node runs, older than the drain's own at every level.
enum class stranded_backlog { none, beside };

/// A drain, and where its claims spent their time.
struct drain_run {
  double rate;               // tasks/s
  double claim_us_per_task;  // in PostgreSQL, in taskmill.claim_by_turns
  double tasks_per_claim;
  double node_us_per_task;  // the node's processor time, user and system
};

/// While the limits are measured, PostgreSQL times each function call
/// (track_functions), for drain_run's figures.
void time_function_calls(db::connection& conn, bool on);

/// `tasks` due tasks over the three mixed types and all five priorities.
drain_run mixed_drain(bench_node& node, db::connection& conn, int tasks, int run_index,
                      stranded_backlog stranded = stranded_backlog::none);

/// `tasks` due tasks over the even types and all five priorities, beside
/// `held` due tasks of the held type older than them at every level: how
/// the even types' tasks drain.
drain_run uneven_drain(bench_node& node, db::connection& conn, int tasks, int held, int run_index);

}  // namespace taskmill::bench
