#pragma once

// The schema, compiled into the binary. Versioned migrations
// (storage/migrations/NNN_name.sql: tables, indexes, data moves; never edited
// once released) are applied in order, each in its own transaction. Then the
// definitions (storage/sql/name.sql: the current text of every function,
// trigger and view, one file per concern) are applied whenever they changed:
// all functions, triggers and views of the schema are dropped and created
// again from the files, in one transaction. Both happen under one advisory
// lock, so that any number of nodes may start at once. During a rolling
// upgrade a node leaves the definitions of a newer generation in place, so
// that an older node restarting does not take away what newer nodes call.

#include "storage/pg.hpp"

#include <vector>

namespace taskmill::db {

struct migration {
  int version;
  const char* name;
  const char* sql;
};

struct definitions {
  const char* name;
  const char* sql;
};

/// The definitions' generation: one more at every change to storage/sql.
/// In a rolling upgrade nodes of two releases run side by side on the newer
/// release's definitions, which must answer every call of the previous
/// release's nodes (new arguments with defaults, no function removed or
/// renamed while they still call it). `checksum` is that of the files the
/// generation stands for; the storage tests fail when the files no longer
/// match it.
struct definitions_generation {
  int number;
  const char* checksum;
};
inline constexpr definitions_generation current_generation{25, "9f8d9e15d3750ce4"};

/// The checksum a migration is recorded with.
std::string migration_checksum(const char* sql);

/// The checksum the definitions files are recorded with, taken together.
std::string definitions_checksum(const std::vector<definitions>& definitions);

/// Every migration, in version order (generated from storage/migrations/).
const std::vector<migration>& all_migrations();

/// Every definitions file, by name (generated from storage/sql/).
const std::vector<definitions>& all_definitions();

/// Applies the migrations `conn` lacks and the definitions of `generation` if
/// they changed, unless the database holds those of a newer generation;
/// returns the schema version. Fails if an applied migration no longer
/// matches its file. A database made by the releases before the baseline
/// (migrations 1 to 8, all applied) is taken over in place. With
/// `keep_open`, the transaction it runs in is left open, for the caller to
/// work in and roll back (a dry run).
caf::expected<int> apply_migrations(connection& conn, const std::vector<migration>& migrations,
                                    const std::vector<definitions>& definitions = all_definitions(),
                                    int generation = current_generation.number,
                                    bool keep_open = false);

}  // namespace taskmill::db
