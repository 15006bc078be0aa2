#include "storage/migrations.hpp"

#include "messages/errors.hpp"

#include <cstdio>
#include <map>

namespace taskmill::db {

namespace {

// Key of the session advisory lock that serializes migrations across nodes.
constexpr const char* lock_sql = "SELECT pg_advisory_lock(7345, 1)";
constexpr const char* unlock_sql = "SELECT pg_advisory_unlock(7345, 1)";

std::string checksum(const char* text) {
  uint64_t hash = 1469598103934665603ull;  // FNV-1a
  for (const char* p = text; *p; ++p) {
    hash ^= static_cast<unsigned char>(*p);
    hash *= 1099511628211ull;
  }
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(hash));
  return buf;
}

caf::expected<std::map<int, std::string>> applied_versions(connection& conn) {
  auto setup = conn.exec(
      "CREATE SCHEMA IF NOT EXISTS taskmill;"
      "CREATE TABLE IF NOT EXISTS taskmill.schema_migrations ("
      "  version integer PRIMARY KEY, name text NOT NULL, checksum text NOT NULL,"
      "  applied_at timestamptz NOT NULL DEFAULT now())");
  if (!setup) return setup.error();
  auto rows = conn.exec("SELECT version, checksum FROM taskmill.schema_migrations");
  if (!rows) return rows.error();
  std::map<int, std::string> out;
  for (int i = 0; i < rows->rows(); ++i) out.emplace(rows->int32(i, 0), rows->string(i, 1));
  return out;
}

caf::error apply_one(connection& conn, const migration& m) {
  if (auto begin = conn.exec("BEGIN"); !begin) return begin.error();
  auto applied = conn.exec(m.sql);
  if (applied)
    applied = conn.exec(
        "INSERT INTO taskmill.schema_migrations (version, name, checksum) VALUES ($1, $2, $3)",
        {std::to_string(m.version), std::string{m.name}, checksum(m.sql)});
  if (applied) applied = conn.exec("COMMIT");
  if (applied) return caf::none;
  conn.exec("ROLLBACK");
  return make_error(errc::storage_error, "migration " + std::to_string(m.version) + "_" + m.name +
                                             " failed: " + error_message(applied.error()));
}

caf::expected<int> apply_locked(connection& conn, const std::vector<migration>& migrations) {
  auto applied = applied_versions(conn);
  if (!applied) return applied.error();
  int version = 0;
  for (const auto& m : migrations) {
    auto it = applied->find(m.version);
    if (it != applied->end()) {
      if (it->second != checksum(m.sql))
        return make_error(errc::storage_error, "migration " + std::to_string(m.version) + "_" +
                                                   m.name + " was changed after it was applied");
    } else if (auto err = apply_one(conn, m)) {
      return err;
    }
    version = m.version;
  }
  if (!applied->empty() && applied->rbegin()->first > version)
    return make_error(errc::storage_error, "the database has schema version " +
                                               std::to_string(applied->rbegin()->first) +
                                               ", newer than this taskmill (" +
                                               std::to_string(version) + ")");
  return version;
}

}  // namespace

caf::expected<int> apply_migrations(connection& conn, const std::vector<migration>& migrations) {
  // Another node may hold the lock for as long as its migrations take.
  if (auto r = conn.exec("SET lock_timeout = 0"); !r) return r.error();
  if (auto r = conn.exec(lock_sql); !r) return r.error();
  auto version = apply_locked(conn, migrations);
  auto unlocked = conn.exec(unlock_sql);
  if (!unlocked && version) return unlocked.error();
  if (auto r = conn.exec("RESET lock_timeout"); !r && version) return r.error();
  return version;
}

}  // namespace taskmill::db
