#pragma once

// The bench's purge (#50): stopped tasks past the purge retention, purged
// as the leader's watcher purges them, a sweep at a time, until none is
// left: how long it takes and how much WAL it writes, for the tasks of one
// day (dropped whole where the schema keeps days) and for as many stopped
// on a day without a table of its own (deleted row by row). A node of an
// older release (--node-binary) makes its own schema, so the same phase
// measures the purge before days.

#include "tools/bench/harness.hpp"

namespace taskmill::bench {

struct purge_plan {
  int runs;
  /// The stopped tasks purged in each measurement.
  int tasks;
};

/// The purge phase on the bench's database (no node runs meanwhile).
phase_report measure_purge(const purge_plan& plan, db::connection& conn,
                           const announce_fn& announce);

}  // namespace taskmill::bench
