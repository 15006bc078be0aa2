#pragma once

// `taskmill node --check-config`: what a start would refuse, found without
// starting.

#include "config/config.hpp"

#include <string>
#include <vector>

namespace taskmill {

struct config_check {
  /// Each thing a start would refuse, naming the option.
  std::vector<std::string> problems;
  /// What was not checked, and why.
  std::vector<std::string> notes;
};

/// Checks what reading `cfg` does not: the cluster's certificates (readable,
/// PEM, the key the certificate's, not expired), the embedded PostgreSQL's
/// programs and data directory, and, through the database when one is
/// reachable, everything a start writes (types, key spaces, jobs) and the
/// reconciler's queries, in a transaction that is rolled back: the database
/// is left as it was, migrations included.
config_check check_config(const config& cfg);

}  // namespace taskmill
