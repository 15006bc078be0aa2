#pragma once

// Versioned schema migrations (storage/migrations/NNN_name.sql), compiled into
// the binary and applied in order under an advisory lock, each in its own
// transaction, so that any number of nodes may start at once.

#include "storage/pg.hpp"

#include <vector>

namespace taskmill::db {

struct migration {
  int version;
  const char* name;
  const char* sql;
};

/// Every migration, in version order (generated from storage/migrations/).
const std::vector<migration>& all_migrations();

/// Applies what `conn` lacks and returns the schema version. Fails if an
/// applied migration no longer matches its file.
caf::expected<int> apply_migrations(connection& conn, const std::vector<migration>& migrations);

}  // namespace taskmill::db
