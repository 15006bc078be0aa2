#pragma once

// The bench's measurements of running limits: drains with and without
// them over backlogs of growing size, beside work no node runs, and a type
// held to a small limit among types without one, with where the claims
// spend their time.

#include "tools/bench/harness.hpp"

namespace taskmill::bench {

struct limits_plan {
  int runs;
  /// The backlogs of the drains with and without limits, smallest first.
  std::vector<int> backlogs;
  /// The uneven drain: tasks of the types without a limit, and of the one
  /// held to 5 beside them.
  int even_tasks;
  int held_tasks;
};

/// The limits phase on the bench's database, its nodes run from `binary`.
phase_report measure_limits(const limits_plan& plan, const std::string& binary,
                            const std::string& conninfo, db::connection& conn,
                            const announce_fn& announce);

}  // namespace taskmill::bench
