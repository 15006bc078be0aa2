#pragma once

// A PgBouncer (Debian's pgbouncer) in transaction pooling mode in front of a
// PostgreSQL on this host, for the tests and the benchmark: its files in a
// directory of the caller's, run as that directory's owner (PgBouncer
// refuses root).

#include <caf/expected.hpp>

#include <string>

namespace taskmill::db {

/// Starts one in front of the server at `server_conninfo` (host=127.0.0.1
/// port=... user=... password=...) with `pool_size` server connections per
/// database; answers the connection string that goes through it.
caf::expected<std::string> start_pgbouncer(const std::string& dir,
                                           const std::string& server_conninfo, int pool_size);

/// Stops the one started in `dir`, if any.
void stop_pgbouncer(const std::string& dir);

}  // namespace taskmill::db
