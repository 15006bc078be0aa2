#pragma once

// The bench's scale of the table (#50): a drain, the in-process pickup and
// the calls the API and the console make, on a table that holds a long
// history of finished tasks, against the same on an empty one (the pickup:
// on an empty database of the same server, in turn with it).

#include "tools/bench/harness.hpp"

#include <cstdint>
#include <string>

namespace taskmill::bench {

struct history_plan {
  int runs;
  /// The finished tasks loaded under the second measurements.
  int finished_tasks;
  /// The drain's due tasks.
  int drain_tasks;
  /// The in-process pickup's pace.
  double latency_seconds;
  int latency_rate;
};

/// The history phase on the bench's database, its node run from `binary`.
phase_report measure_history(const history_plan& plan, const std::string& binary,
                             const std::string& conninfo, db::connection& conn,
                             const announce_fn& announce);

}  // namespace taskmill::bench
