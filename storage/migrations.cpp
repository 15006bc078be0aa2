#include "storage/migrations.hpp"

#include "messages/errors.hpp"

#include <spdlog/spdlog.h>

#include <cstdio>
#include <functional>
#include <map>

namespace taskmill::db {

namespace {

// The lock that serializes migrations across nodes: the transaction's, so
// that a node gone silent while it migrates holds it no longer than
// PostgreSQL waits for its next statement (idle_in_transaction below); a
// session lock stayed until its connection was found dead.
constexpr const char* lock_sql = "SELECT pg_advisory_xact_lock(7345, 1)";
constexpr const char* migrating_idle_timeout = "10s";
// A migration may rewrite whole tables (migration 21 moves and checks every
// task), which on a large database takes longer than a request's statement
// may: its statements are bounded by this instead of the node's statement
// timeout. The node's wait for them is bounded by its keepalives alone.
constexpr std::chrono::hours migration_statement_timeout{1};

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
      "  applied_at timestamptz NOT NULL DEFAULT now());"
      "CREATE TABLE IF NOT EXISTS taskmill.schema_definitions ("
      "  checksum text NOT NULL, schema_version integer NOT NULL,"
      "  applied_at timestamptz NOT NULL DEFAULT now());"
      // Definitions written before generations were counted are generation 0.
      "ALTER TABLE taskmill.schema_definitions"
      "  ADD COLUMN IF NOT EXISTS generation integer NOT NULL DEFAULT 0");
  if (!setup) return setup.error();
  auto rows = conn.exec("SELECT version, checksum FROM taskmill.schema_migrations");
  if (!rows) return rows.error();
  std::map<int, std::string> out;
  for (int i = 0; i < rows->rows(); ++i) out.emplace(rows->int32(i, 0), rows->string(i, 1));
  return out;
}

/// Runs one step of the migrating transaction, naming it in its error.
caf::error step(const std::string& what, const std::function<caf::expected<result>()>& work) {
  auto done = work();
  if (done) return caf::none;
  return make_error(errc::storage_error, what + " failed: " + error_message(done.error()));
}

caf::error apply_one(connection& conn, const migration& m) {
  return step("migration " + std::to_string(m.version) + "_" + m.name, [&] {
    auto r = conn.exec(m.sql);
    if (r)
      r = conn.exec(
          "INSERT INTO taskmill.schema_migrations (version, name, checksum) VALUES ($1, $2, "
          "$3)",
          {std::to_string(m.version), std::string{m.name}, checksum(m.sql)});
    return r;
  });
}

/// The migrations 1 to 8 of the releases before the baseline, by checksum.
/// Their final schema is the baseline's; the definitions replace their
/// functions.
const std::map<int, std::string>& pre_baseline_versions() {
  static const std::map<int, std::string> versions{
      {1, "37d77fbad5a13994"}, {2, "c4a625660fa61738"}, {3, "ed987f2d1df2e9eb"},
      {4, "14bd2e4d4fd380f1"}, {5, "888a3719979d69ce"}, {6, "095ea0c70844bc4e"},
      {7, "ca1e0356235e712c"}, {8, "31f0115cf4a36751"}};
  return versions;
}

/// Records a database of the releases before the baseline as one at the
/// baseline: the tables are the same.
caf::error take_over_pre_baseline(connection& conn, const migration& baseline,
                                  std::map<int, std::string>& applied) {
  auto done = step("taking over the schema of version 8", [&] {
    auto r = conn.exec("DELETE FROM taskmill.schema_migrations");
    if (r)
      r = conn.exec(
          "INSERT INTO taskmill.schema_migrations (version, name, checksum) VALUES ($1, $2, $3)",
          {std::to_string(baseline.version), std::string{baseline.name}, checksum(baseline.sql)});
    if (r) r = conn.exec("DELETE FROM taskmill.schema_definitions");
    return r;
  });
  if (done) return done;
  applied = {{baseline.version, checksum(baseline.sql)}};
  return caf::none;
}

// Drops every function, trigger, view and composite type of the schema
// (tables' row types aside; a partition's triggers go with its table's): the definitions files then
// create today's. Without CASCADE: should an object outside taskmill depend on one, the change
// fails rather than drop it. Objects of an extension are not ours: CREATE EXTENSION run as the
// taskmill user puts them in the schema named like it (search_path "$user"), e.g.
// pg_stat_statements' views. Nor are procedures and aggregates, which the definitions never create:
// DROP FUNCTION refused them, and no node started.
constexpr const char* drop_definitions_sql = R"sql(
DO $$
DECLARE
  r record;
BEGIN
  FOR r IN SELECT t.tgname, t.tgrelid::regclass AS tbl
             FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
            WHERE c.relnamespace = 'taskmill'::regnamespace AND NOT t.tgisinternal
              AND t.tgparentid = 0
              AND NOT EXISTS (SELECT FROM pg_depend d WHERE d.classid = 'pg_class'::regclass
                                 AND d.objid = c.oid AND d.deptype = 'e') LOOP
    EXECUTE format('DROP TRIGGER %I ON %s', r.tgname, r.tbl);
  END LOOP;
  FOR r IN SELECT c.oid::regclass AS v FROM pg_class c
            WHERE c.relnamespace = 'taskmill'::regnamespace AND c.relkind = 'v'
              AND NOT EXISTS (SELECT FROM pg_depend d WHERE d.classid = 'pg_class'::regclass
                                 AND d.objid = c.oid AND d.deptype = 'e') LOOP
    EXECUTE format('DROP VIEW %s', r.v);
  END LOOP;
  FOR r IN SELECT p.oid::regprocedure AS f FROM pg_proc p
            WHERE p.pronamespace = 'taskmill'::regnamespace AND p.prokind = 'f'
              AND NOT EXISTS (SELECT FROM pg_depend d WHERE d.classid = 'pg_proc'::regclass
                                 AND d.objid = p.oid AND d.deptype = 'e') LOOP
    EXECUTE format('DROP FUNCTION %s', r.f);
  END LOOP;
  FOR r IN SELECT c.reltype::regtype AS t FROM pg_class c
            WHERE c.relnamespace = 'taskmill'::regnamespace AND c.relkind = 'c'
              AND NOT EXISTS (SELECT FROM pg_depend d WHERE d.classid = 'pg_type'::regclass
                                 AND d.objid = c.reltype AND d.deptype = 'e') LOOP
    EXECUTE format('DROP TYPE %s', r.t);
  END LOOP;
END
$$)sql";

/// Applies `definitions` unless they are there already, or those of a newer
/// generation are: an older node restarting during a rolling upgrade must
/// not put its functions back. Within a generation (builds under
/// development, tests) the last node to start wins.
caf::error apply_definitions(connection& conn, const std::vector<definitions>& definitions,
                             int version, int generation) {
  auto wanted = definitions_checksum(definitions);
  auto current = conn.exec("SELECT checksum, generation FROM taskmill.schema_definitions");
  if (!current) return current.error();
  if (current->rows() == 1 && current->int32(0, 1) > generation) {
    if (current->string(0, 0) != wanted)
      spdlog::warn(
          "schema: the database holds the definitions of generation {}, newer than this node's "
          "({}); this node runs on them",
          current->int32(0, 1), generation);
    return caf::none;
  }
  // The same text written by a node that did not count generations: only
  // the number is new, and replacing every trigger would lock the tables
  // that nodes are working on for nothing.
  if (current->rows() == 1 && current->string(0, 0) == wanted) {
    if (current->int32(0, 1) == generation) return caf::none;
    auto r = conn.exec("UPDATE taskmill.schema_definitions SET generation = $1",
                       {std::to_string(generation)});
    return r ? caf::none : r.error();
  }
  return step("applying the definitions in storage/sql", [&] {
    // Functions may name each other in any order.
    auto r = conn.exec("SET LOCAL check_function_bodies = off");
    if (r) r = conn.exec(drop_definitions_sql);
    for (const auto& d : definitions) {
      if (!r) break;
      r = conn.exec(d.sql);
      if (!r)
        return caf::expected<result>{make_error(
            errc::storage_error, std::string{d.name} + ".sql: " + error_message(r.error()))};
    }
    if (r) r = conn.exec("DELETE FROM taskmill.schema_definitions");
    // schema_version still tells nodes of the releases before generations,
    // which read it, that these are not newer than theirs.
    if (r)
      r = conn.exec(
          "INSERT INTO taskmill.schema_definitions (checksum, schema_version, generation) "
          "VALUES ($1, $2, $3)",
          {wanted, std::to_string(version), std::to_string(generation)});
    return r;
  });
}

caf::expected<int> apply_locked(connection& conn, const std::vector<migration>& migrations,
                                const std::vector<definitions>& definitions, int generation) {
  auto applied = applied_versions(conn);
  if (!applied) return applied.error();
  if (*applied == pre_baseline_versions() && !migrations.empty())
    if (auto err = take_over_pre_baseline(conn, migrations.front(), *applied)) return err;
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
  if (auto err = apply_definitions(conn, definitions, version, generation)) return err;
  return version;
}

}  // namespace

std::string migration_checksum(const char* sql) {
  return checksum(sql);
}

std::string definitions_checksum(const std::vector<definitions>& definitions) {
  std::string all;
  for (const auto& d : definitions) all += d.sql;
  return checksum(all.c_str());
}

caf::expected<int> apply_migrations(connection& conn, const std::vector<migration>& migrations,
                                    const std::vector<definitions>& definitions, int generation,
                                    bool keep_open) {
  // All of it one transaction: it happens whole or not at all, whoever dies
  // on the way. Another node may hold the lock for as long as its
  // migrations take.
  auto begun = conn.exec(
      std::string{"BEGIN; SET LOCAL lock_timeout = 0; SET LOCAL statement_timeout = "} +
      std::to_string(std::chrono::milliseconds{migration_statement_timeout}.count()) +
      "; SET LOCAL idle_in_transaction_session_timeout = '" + migrating_idle_timeout + "'");
  if (!begun) return begun.error();
  auto locked = conn.exec(lock_sql);
  auto version = locked ? apply_locked(conn, migrations, definitions, generation)
                        : caf::expected<int>{locked.error()};
  if (version && !keep_open)
    if (auto committed = conn.exec("COMMIT"); !committed) return committed.error();
  if (!version) conn.exec("ROLLBACK");
  return version;
}

}  // namespace taskmill::db
