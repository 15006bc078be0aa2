#pragma once

// The bench's measurement of keyed limits (SPEC §4 Keyed limits): a drain
// over many keys, each held to a small running limit (and with a rate),
// against the same drain without keys; and the pickup of small keys' tasks
// beside one key's large backlog, against the same without it.

#include "tools/bench/harness.hpp"

namespace taskmill::bench {

struct keys_plan {
  int runs;
  int tasks;
  int keys;
  int key_limit;
  /// Fairness: one key's backlog, and the small keys that submit one task
  /// each at random times over `fair_seconds`, beside it and alone.
  int big_key_backlog;
  int small_keys;
  double fair_seconds;
};

/// The keys phase on the bench's database, its nodes run from `binary`.
phase_report measure_keys(const keys_plan& plan, const std::string& binary,
                          const std::string& conninfo, db::connection& conn,
                          const announce_fn& announce);

}  // namespace taskmill::bench
