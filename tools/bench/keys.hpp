#pragma once

// The bench's measurement of keyed limits (SPEC §4 Keyed limits): a drain
// over many keys, each held to a small running limit, against the same
// drain without keys.

#include "tools/bench/harness.hpp"

namespace taskmill::bench {

struct keys_plan {
  int runs;
  int tasks;
  int keys;
  int key_limit;
};

/// The keys phase on the bench's database, its nodes run from `binary`.
phase_report measure_keys(const keys_plan& plan, const std::string& binary,
                          const std::string& conninfo, db::connection& conn,
                          const announce_fn& announce);

}  // namespace taskmill::bench
