#pragma once

// PostgreSQL's lock table, shared by every session of the server: a submit
// holds a lock a task (its unit's) until it commits, so a few batches of the
// largest size at once need more of it than a server's defaults hold.

#include "storage/pg.hpp"

#include <caf/expected.hpp>

#include <cstdint>
#include <optional>
#include <string>

namespace taskmill::db {

/// Locks the table should hold: this many batches of the largest size at
/// once, from as many nodes or clients.
inline constexpr int64_t lock_table_batches = 4;

/// What an operator should know of a lock table of `locks_per_transaction`
/// (max_locks_per_transaction) a session for `sessions` (max_connections
/// plus max_prepared_transactions): nothing when it holds
/// lock_table_batches batches of the largest size.
std::optional<std::string> lock_table_shortfall(int64_t locks_per_transaction, int64_t sessions);

/// The same, of the server `conn` is on.
caf::expected<std::optional<std::string>> lock_table_shortfall(connection& conn);

}  // namespace taskmill::db
