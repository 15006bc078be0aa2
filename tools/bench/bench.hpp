#pragma once

#include <string>
#include <vector>

namespace taskmill {

/// How large a bench run is: the full one measures what the issues ask
/// for; the quick one the same things smaller, one run each (about three
/// minutes); the smoke one checks in about a minute that every measurement
/// runs and loses nothing, with figures too small to mean much.
enum class bench_size { full, quick, smoke };

struct bench_options {
  bench_size size = bench_size::full;
  /// A server to create a throwaway database on; empty: start a private
  /// PostgreSQL in a temporary directory.
  std::string database;
  /// Where the JSON report goes; empty: nowhere.
  std::string output = "bench-results.json";
  /// The taskmill binary that runs the node.
  std::string binary;
  /// The phases to run (bench_phases); empty: all of them.
  std::vector<std::string> only;
  /// Runs of each measurement; 0: the plan's (3 full, 1 otherwise).
  int runs = 0;
  /// Finished tasks the history phase loads; 0: the plan's.
  int history_tasks = 0;
  /// Stopped tasks the purge phase purges; 0: the plan's.
  int purge_tasks = 0;
};

/// The phases of a bench run, for --only.
extern const std::vector<std::string> bench_phases;

/// `taskmill bench`: measures a node against the raw-SQL ceiling on the same
/// server, prints a table and writes JSON. Exits nonzero when a measurement
/// could not be made or a task was lost or run twice; missed performance
/// targets are reported, not failed.
int run_bench(const bench_options& options);

}  // namespace taskmill
