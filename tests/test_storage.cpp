#define BOOST_TEST_MODULE storage
#include <boost/test/unit_test.hpp>

#include "messages/errors.hpp"
#include "storage/lock_table.hpp"
#include "storage/migrations.hpp"
#include "storage/rows.hpp"
#include "storage/statements.hpp"
#include "storage/storage.hpp"
#include "tests/support/task_sql.hpp"
#include "tests/support/test_database.hpp"
#include "tools/node/node.hpp"
#include "tools/postgres/embedded_postgres.hpp"
#include "tools/tcp_proxy.hpp"

#include <libpq-fe.h>
#include <caf/event_based_actor.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <iterator>
#include <latch>
#include <limits>
#include <mutex>
#include <regex>
#include <set>
#include <thread>

using namespace taskmill;
using namespace std::chrono_literals;

namespace {

/// SQL that gives the tasks `where` selects every status in turn, by id.
std::string every_status_by_id(const std::string& where) {
  return "UPDATE taskmill.tasks SET status = (ARRAY['pending', 'failed', 'running', "
         "'succeeded', 'dead', 'cancelled', 'stopped']::taskmill.task_status[])[1 + id % 7], "
         "attempt = 1, picked_by = 'n1', started_at = now(), finished_at = now() WHERE " +
         where;
}

pb::StorageStatus status_of(caf::actor_system& sys, const storage_actor& storage) {
  auto status = test::ask<pb::StorageStatus>(sys, storage, status_atom_v);
  BOOST_REQUIRE(status);
  return *status;
}

/// A connected storage actor that wrote the default type settings, as a
/// node's does as it starts.
storage_actor start_storage(caf::actor_system& sys, const std::string& conninfo) {
  storage_options opts;
  opts.conninfo = conninfo;
  opts.node = "test-node";
  opts.reconnect_min = 50ms;
  opts.reconnect_max = 200ms;
  opts.listen = false;
  auto storage = spawn_storage(sys, opts);
  BOOST_REQUIRE(test::eventually([&] { return status_of(sys, storage).connected(); }));
  auto configured = test::ask<int32_t>(sys, storage, configure_atom_v, type_settings(config{}));
  BOOST_REQUIRE_MESSAGE(configured, test::describe(configured));
  return storage;
}

pb::SubmitTasks one_task(const std::string& type, const std::string& key) {
  pb::SubmitTasks req;
  auto t = req.add_tasks();
  t->set_type(type);
  t->set_key(key);
  return req;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(migrations)

BOOST_AUTO_TEST_CASE(apply_twice_changes_nothing) {
  test::scratch_database database{"mig"};
  auto conn = database.connect();
  const auto& all = db::all_migrations();
  auto first = db::apply_migrations(conn, all);
  BOOST_REQUIRE_MESSAGE(first, test::describe(first));
  BOOST_CHECK_EQUAL(*first, all.back().version);
  auto second = db::apply_migrations(conn, all);
  BOOST_REQUIRE(second);
  BOOST_CHECK_EQUAL(*second, *first);
  BOOST_CHECK_EQUAL(database.scalar("SELECT count(*) FROM taskmill.schema_migrations"),
                    std::to_string(all.size()));
  BOOST_CHECK_EQUAL(database.scalar("SELECT count(*) FROM taskmill.tasks"), "0");
}

// Migrations 7 and 8 rebuild the claim indexes of a database already in use,
// in place: claims under type limits find the tasks there through them.
BOOST_AUTO_TEST_CASE(the_claim_indexes_are_rebuilt_over_the_tasks_already_there) {
  test::scratch_database database{"migbytype"};
  auto conn = database.connect();
  const auto& all = db::all_migrations();
  std::vector<db::migration> before;
  std::copy_if(all.begin(), all.end(), std::back_inserter(before),
               [](const db::migration& m) { return m.version < 7; });
  // Without today's definitions, which need the tables of later migrations
  // (taskmill.handoff_requests): the tasks go in as rows.
  BOOST_REQUIRE(db::apply_migrations(conn, before, {}));
  database.exec(
      "INSERT INTO taskmill.tasks (type, key, priority, execute_at, trace_id, max_retries, "
      "timeout_ms, backoff_kind, backoff_base_ms, backoff_cap_ms, backoff_jitter) "
      "SELECT CASE WHEN g % 4 = 0 OR g = 401 THEN 'capped' ELSE 'other' END, 'k' || g, 3, "
      "CASE WHEN g <= 400 THEN now() ELSE now() + interval '1 day' END, 't', 3, 5000, "
      "'exponential', 1000, 3600000, 0.1 FROM generate_series(1, 401) g");
  auto upgraded = db::apply_migrations(conn, all);
  BOOST_REQUIRE_MESSAGE(upgraded, test::describe(upgraded));
  BOOST_CHECK_EQUAL(*upgraded, all.back().version);
  auto valid_with = [&](const std::string& index, const std::string& columns) {
    return database.scalar("SELECT indisvalid AND pg_get_indexdef(indexrelid) LIKE '%(" + columns +
                           ")%' FROM pg_index WHERE indexrelid = 'taskmill." + index +
                           "'::regclass");
  };
  BOOST_CHECK_EQUAL(valid_with("tasks_due", "priority, execute_at, id"), "t");
  BOOST_CHECK_EQUAL(valid_with("tasks_due_by_type", "type, priority, execute_at, id"), "t");
  BOOST_CHECK_EQUAL(database.scalar("SELECT count(*) FROM taskmill.claim_by_turns('n', 500, "
                                    "'{3,3,3}', '{capped}', '{60}', 0, '{capped}', NULL, NULL)"),
                    "60");
  BOOST_CHECK_EQUAL(database.scalar("SELECT count(*) FROM taskmill.claim_by_turns('n', 500, "
                                    "'{3,3,3}', '{capped}', '{500}', 0, NULL, NULL, NULL)"),
                    "340");
  BOOST_CHECK_EQUAL(database.scalar("SELECT string_agg(type || ':' || status, ',' "
                                    "ORDER BY type, status::text) "
                                    "FROM (SELECT DISTINCT type, status FROM taskmill.tasks) s"),
                    "capped:pending,capped:running,other:running");
}

// SPEC §11: a populated task table is partitioned in place. Its stopped
// tasks move into the days they stopped on (those of more than two months
// ago into the undated partition), its successes into theirs, the others
// stay as they were, keys and ids too, and new ids follow on.
BOOST_AUTO_TEST_CASE(a_populated_databases_finished_tasks_move_into_their_partitions) {
  test::scratch_database database{"migdays"};
  auto conn = database.connect();
  const auto& all = db::all_migrations();
  std::vector<db::migration> before;
  std::copy_if(all.begin(), all.end(), std::back_inserter(before),
               [](const db::migration& m) { return m.version < 21; });
  BOOST_REQUIRE(db::apply_migrations(conn, before, {}));
  // As the definitions of the generation before do: a task's delete drops
  // its key.
  database.exec(
      "CREATE FUNCTION taskmill.drop_keys() RETURNS trigger LANGUAGE plpgsql AS "
      "$$ BEGIN DELETE FROM taskmill.task_keys; RETURN NULL; END $$");
  database.exec(
      "CREATE TRIGGER keys_gone AFTER DELETE ON taskmill.tasks FOR EACH STATEMENT EXECUTE "
      "FUNCTION taskmill.drop_keys()");
  database.exec(
      "INSERT INTO taskmill.tasks (type, key, status, updated_at, trace_id, priority, max_retries, "
      "timeout_ms, backoff_kind, backoff_base_ms, backoff_cap_ms, backoff_jitter) "
      "SELECT 'T', 'k' || s.g, s.status::taskmill.task_status, now() - s.age, 't', 3, 3, 5000, "
      "'exponential', 1000, 3600000, 0.1 "
      "FROM unnest('{pending,pending,succeeded,dead,cancelled,stopped,stopped,stopped,stopped,"
      "stopped}'::text[], '{0,0,1 hour,2 days,3 days,0,1 day,1 day,3 days,100 days}'::interval[]) "
      "WITH ORDINALITY AS s(status, age, g)");
  database.exec("INSERT INTO taskmill.task_keys SELECT type, key, version, id FROM taskmill.tasks");
  auto last_id = database.scalar("SELECT max(id) FROM taskmill.tasks");
  auto upgraded = db::apply_migrations(conn, all);
  BOOST_REQUIRE_MESSAGE(upgraded, test::describe(upgraded));
  test::write_default_type_settings(conn);
  auto where = database.scalar(
      "SELECT string_agg(s.status || ':' || s.part, ',' ORDER BY s.g) FROM (SELECT "
      "substr(key, 2)::int AS g, status, CASE WHEN tableoid = 'taskmill.live_tasks'::regclass "
      "THEN 'live' WHEN tableoid = 'taskmill.succeeded_tasks'::regclass THEN 'successes' "
      "WHEN tableoid = 'taskmill.stopped_tasks_undated'::regclass THEN 'undated' "
      "WHEN tableoid = to_regclass('taskmill.' || taskmill.stopped_day_table((updated_at AT TIME "
      "ZONE 'UTC')::date)) THEN 'its day' ELSE tableoid::regclass::text END AS part "
      "FROM taskmill.tasks) s");
  BOOST_CHECK_EQUAL(where,
                    "pending:live,pending:live,succeeded:successes,dead:live,cancelled:live,"
                    "stopped:its day,stopped:its day,stopped:its day,stopped:its day,"
                    "stopped:undated");
  BOOST_CHECK_EQUAL(database.scalar("SELECT count(*) FROM taskmill.task_keys"), "10");
  BOOST_CHECK_EQUAL(database.scalar("SELECT max(id) FROM taskmill.tasks"), last_id);
  auto next = database.scalar("SELECT ((taskmill.submit('T', 'new')).task).id");
  BOOST_CHECK_GT(std::stoll(next), std::stoll(last_id));
  BOOST_CHECK_EQUAL(database.scalar("SELECT ((taskmill.submit('T', 'k7')).outcome)"), "replaced");
  BOOST_CHECK_EQUAL(database.scalar("SELECT ((taskmill.submit('T', 'k3')).outcome)"), "duplicate");
  BOOST_CHECK_EQUAL(
      database.scalar("SELECT to_regclass('taskmill.' || taskmill.stopped_day_table((now() AT "
                      "TIME ZONE 'UTC')::date + 1)) IS NOT NULL"),
      "t");
  BOOST_CHECK_EQUAL(database.scalar("SELECT count(*) FROM taskmill.claim_by_turns('n', 500, "
                                    "'{3,3,3}', '{}', '{}', 0, NULL, NULL, NULL)"),
                    "4");
}

BOOST_AUTO_TEST_CASE(concurrent_nodes_apply_each_migration_once) {
  test::scratch_database database{"migrace"};
  constexpr int nodes = 8;
  std::vector<caf::expected<int>> versions(nodes, caf::error{});
  std::latch go{nodes};
  std::vector<std::thread> threads;
  for (int i = 0; i < nodes; ++i)
    threads.emplace_back([&, i] {
      auto conn = database.connect();
      go.arrive_and_wait();
      versions[i] = db::apply_migrations(conn, db::all_migrations());
    });
  for (auto& t : threads) t.join();
  for (auto& v : versions) {
    BOOST_REQUIRE_MESSAGE(v, test::describe(v));
    BOOST_CHECK_EQUAL(*v, db::all_migrations().back().version);
  }
  BOOST_CHECK_EQUAL(database.scalar("SELECT count(*) FROM taskmill.schema_migrations"),
                    std::to_string(db::all_migrations().size()));
}

// The server notices a node's connection gone silent (host or network
// down) within about 25 s, and ends its backend and session state.
BOOST_AUTO_TEST_CASE(sessions_ask_the_server_for_keepalives_and_a_tcp_user_timeout) {
  test::scratch_database database{"keepalive"};
  auto conn = database.connect();
  auto res = conn.exec(
      "SELECT current_setting('tcp_keepalives_idle') || ' ' || "
      "current_setting('tcp_keepalives_interval') || ' ' || "
      "current_setting('tcp_keepalives_count') || ' ' || current_setting('tcp_user_timeout')");
  BOOST_REQUIRE(res);
  BOOST_CHECK_EQUAL(res->string(0, 0), "10 5 3 25000");
}

// After a failover the old primary, back as a standby, still answers: a
// node must notice that it takes no writes and look for the primary.
BOOST_AUTO_TEST_CASE(a_server_that_takes_no_writes_is_left_for_another) {
  test::scratch_database database{"readonly"};
  {
    auto conn = database.connect();
    BOOST_REQUIRE(db::apply_migrations(conn, db::all_migrations()));
  }
  // A connection that worked, whose server then refuses writes.
  auto conn = database.connect();
  BOOST_REQUIRE(conn.exec("SET default_transaction_read_only = on"));
  BOOST_REQUIRE(!conn.prepare_and_enter_pipeline({&db::sql::heartbeat}));
  std::optional<caf::error> answer;
  conn.run({db::call{&db::sql::heartbeat, {"n1", "i1", "false"}}},
           [&](caf::expected<db::result>&& r) { answer = r ? caf::error{} : r.error(); });
  BOOST_REQUIRE(answer && *answer);
  BOOST_CHECK(is(*answer, errc::storage_unavailable));
  BOOST_CHECK_MESSAGE(error_message(*answer).find("takes no writes") != std::string::npos,
                      error_message(*answer));
  BOOST_CHECK(conn.broken());
  // Nor does a node start on such a server.
  database.exec("ALTER DATABASE " + database.name() + " SET default_transaction_read_only = on");
  auto refused = db::connection::open(database.conninfo(), 30s, 2s);
  BOOST_REQUIRE(!refused);
  BOOST_CHECK_MESSAGE(
      error_message(refused.error()).find("target_session_attrs=read-write") != std::string::npos,
      error_message(refused.error()));
  database.exec("ALTER DATABASE " + database.name() + " RESET default_transaction_read_only");
}

// A node that goes silent (network blackholed) while it migrates holds the
// schema lock only as long as PostgreSQL waits for its next statement in
// the transaction (10 s): another node then migrates, and the schema is
// whole, not half of the silent node's.
BOOST_AUTO_TEST_CASE(a_node_silent_while_it_migrates_holds_the_schema_lock_ten_seconds_at_most) {
  test::scratch_database database{"migsilent"};
  std::smatch port;
  BOOST_REQUIRE(std::regex_search(database.conninfo(), port, std::regex{"port=(\\d+)"}));
  tcp_proxy link{"127.0.0.1:" + port[1].str()};
  auto through_link =
      std::regex_replace(database.conninfo(), std::regex{"port=\\d+"},
                         "port=" + link.address().substr(link.address().rfind(':') + 1));
  auto silent = db::connection::open(through_link, 5s, 2s);
  BOOST_REQUIRE_MESSAGE(silent, test::describe(silent));
  std::thread migrating{[&] { db::apply_migrations(*silent, db::all_migrations()); }};
  auto watcher = database.connect();
  bool held = false;
  for (int i = 0; i < 20000 && !held; ++i) {
    auto res = watcher.exec(
        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND classid = 7345 AND objid = "
        "1 AND granted");
    BOOST_REQUIRE(res);
    held = res->int64(0, 0) > 0;
  }
  link.go_silent();
  BOOST_REQUIRE_MESSAGE(held, "the migration ended before it could be cut off");
  auto other = database.connect();
  auto began = std::chrono::steady_clock::now();
  auto version = db::apply_migrations(other, db::all_migrations());
  auto waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
  BOOST_REQUIRE_MESSAGE(version, test::describe(version));
  BOOST_TEST_MESSAGE("the other node migrated after " << waited << " s");
  BOOST_CHECK_LT(waited, 14.0);
  BOOST_CHECK_EQUAL(database.scalar("SELECT count(*) FROM taskmill.schema_migrations"),
                    std::to_string(db::all_migrations().size()));
  link.restore();
  migrating.join();
}

// A migration may rewrite whole tables, which on a large database takes
// longer than a request's statement may: the connection's statement timeout
// does not cut it short, and bounds the requests after it as before. Behind
// a transaction pooler (storage.pooled) the timeout is the database's, as a
// node there cannot set its sessions'.
BOOST_AUTO_TEST_CASE(a_migration_longer_than_the_statement_timeout_is_applied) {
  test::scratch_database database{"migslow"};
  if (test::behind_pooler())
    database.exec("ALTER DATABASE " + database.name() + " SET statement_timeout = 200");
  auto conn = db::connection::open(database.conninfo(), 200ms, 200ms, test::behind_pooler());
  BOOST_REQUIRE_MESSAGE(conn, test::describe(conn));
  auto migrations = db::all_migrations();
  migrations.push_back({migrations.back().version + 1, "slow", "SELECT pg_sleep(1)"});
  auto version = db::apply_migrations(*conn, migrations);
  BOOST_REQUIRE_MESSAGE(version, test::describe(version));
  BOOST_CHECK_EQUAL(*version, migrations.back().version);
  auto after = conn->exec("SELECT pg_sleep(1)");
  BOOST_REQUIRE(!after);
  BOOST_CHECK_MESSAGE(test::describe(after).find("57014") != std::string::npos,
                      test::describe(after));
  BOOST_CHECK(!conn->broken());
}

BOOST_AUTO_TEST_CASE(a_changed_migration_is_refused) {
  test::scratch_database database{"migchg"};
  auto conn = database.connect();
  BOOST_REQUIRE(db::apply_migrations(conn, db::all_migrations()));
  auto changed = db::all_migrations();
  std::string sql = std::string{changed[0].sql} + "\n-- edited";
  changed[0].sql = sql.c_str();
  auto result = db::apply_migrations(conn, changed);
  BOOST_REQUIRE(!result);
  BOOST_CHECK_NE(error_message(result.error()).find("changed after it was applied"),
                 std::string::npos);
}

BOOST_AUTO_TEST_CASE(a_newer_database_is_refused) {
  test::scratch_database database{"mignew"};
  auto conn = database.connect();
  BOOST_REQUIRE(db::apply_migrations(conn, db::all_migrations()));
  database.exec(
      "INSERT INTO taskmill.schema_migrations (version, name, checksum) "
      "VALUES (9999, 'from_the_future', 'x')");
  auto result = db::apply_migrations(conn, db::all_migrations());
  BOOST_REQUIRE(!result);
  BOOST_CHECK_NE(error_message(result.error()).find("newer"), std::string::npos);
}

BOOST_AUTO_TEST_CASE(definitions_are_applied_when_they_change_and_only_then) {
  test::scratch_database database{"migdef"};
  auto conn = database.connect();
  BOOST_REQUIRE(db::apply_migrations(conn, db::all_migrations()));
  auto applied_at = [&] {
    return database.scalar("SELECT applied_at::text FROM taskmill.schema_definitions");
  };
  auto first = applied_at();
  BOOST_REQUIRE(db::apply_migrations(conn, db::all_migrations()));
  BOOST_CHECK_EQUAL(applied_at(), first);
  // A changed file: the function it no longer defines is gone, the new one
  // is there, and nothing else changed.
  auto changed = db::all_definitions();
  changed.push_back(
      {"extra", "CREATE FUNCTION taskmill.answer() RETURNS int LANGUAGE sql AS 'SELECT 42';"});
  BOOST_REQUIRE(db::apply_migrations(conn, db::all_migrations(), changed));
  BOOST_CHECK_EQUAL(database.scalar("SELECT taskmill.answer()"), "42");
  BOOST_REQUIRE(db::apply_migrations(conn, db::all_migrations()));
  BOOST_CHECK_EQUAL(database.scalar("SELECT count(*) FROM pg_proc WHERE proname = 'answer' AND "
                                    "pronamespace = 'taskmill'::regnamespace"),
                    "0");
  // A broken file changes nothing: the transaction rolls back whole.
  auto broken = db::all_definitions();
  broken.push_back({"broken", "CREATE FUNCTION taskmill.nope( RETURNS int;"});
  auto result = db::apply_migrations(conn, db::all_migrations(), broken);
  BOOST_REQUIRE(!result);
  BOOST_CHECK_NE(error_message(result.error()).find("broken.sql"), std::string::npos);
  test::write_default_type_settings(conn);
  BOOST_CHECK_EQUAL(database.scalar("SELECT (taskmill.submit('T', 'k')).outcome"), "created");
}

// A change to storage/sql is a new generation of the definitions, or an older
// node restarting during a rolling upgrade would put its own back.
BOOST_AUTO_TEST_CASE(the_definitions_files_are_those_of_their_generation) {
  auto now = db::definitions_checksum(db::all_definitions());
  BOOST_CHECK_MESSAGE(now == db::current_generation.checksum,
                      "storage/sql changed: set current_generation in storage/migrations.hpp to {"
                          << db::current_generation.number + 1 << ", \"" << now << "\"}");
}

BOOST_AUTO_TEST_CASE(an_older_node_leaves_the_definitions_of_a_newer_generation_in_place) {
  test::scratch_database database{"miggen"};
  auto conn = database.connect();
  auto ours = db::current_generation.number;
  auto generation = [&] {
    return database.scalar("SELECT generation FROM taskmill.schema_definitions");
  };
  auto answers = [&] {
    return database.scalar(
        "SELECT count(*) FROM pg_proc WHERE proname = 'answer' AND "
        "pronamespace = 'taskmill'::regnamespace");
  };
  auto function_oid = [&] {
    return database.scalar("SELECT 'taskmill.wake_nodes()'::regprocedure::oid");
  };
  // A database whose definitions a node of the previous release wrote, before
  // generations were counted, with the text of generation 1: only the number
  // is recorded, nothing is created again.
  BOOST_REQUIRE(db::apply_migrations(conn, db::all_migrations()));
  database.exec("ALTER TABLE taskmill.schema_definitions DROP COLUMN generation");
  auto before = function_oid();
  BOOST_REQUIRE(db::apply_migrations(conn, db::all_migrations()));
  BOOST_CHECK_EQUAL(generation(), std::to_string(ours));
  BOOST_CHECK_EQUAL(function_oid(), before);
  // Another text of the previous release is replaced.
  database.exec("UPDATE taskmill.schema_definitions SET checksum = 'another text', generation = 0");
  BOOST_REQUIRE(db::apply_migrations(conn, db::all_migrations()));
  BOOST_CHECK_EQUAL(generation(), std::to_string(ours));
  BOOST_CHECK_NE(function_oid(), before);

  auto newer = db::all_definitions();
  newer.push_back(
      {"extra", "CREATE FUNCTION taskmill.answer() RETURNS int LANGUAGE sql AS 'SELECT 42';"});
  BOOST_REQUIRE(db::apply_migrations(conn, db::all_migrations(), newer, ours + 1));
  BOOST_CHECK_EQUAL(answers(), "1");
  // This node's restart, older than the newest: the newer functions stay.
  auto kept = db::apply_migrations(conn, db::all_migrations());
  BOOST_REQUIRE_MESSAGE(kept, test::describe(kept));
  BOOST_CHECK_EQUAL(answers(), "1");
  BOOST_CHECK_EQUAL(generation(), std::to_string(ours + 1));
  // A node newer still replaces them.
  BOOST_REQUIRE(db::apply_migrations(conn, db::all_migrations(), db::all_definitions(), ours + 2));
  BOOST_CHECK_EQUAL(answers(), "0");
  BOOST_CHECK_EQUAL(generation(), std::to_string(ours + 2));
  test::write_default_type_settings(conn);
  BOOST_CHECK_EQUAL(database.scalar("SELECT (taskmill.submit('T', 'k')).outcome"), "created");
}

// CREATE EXTENSION run as the taskmill user puts the extension's functions,
// views and composite types in the taskmill schema, and CREATE PROCEDURE the
// procedure (search_path "$user"); applying the definitions leaves them be
// (it once refused to start a node next to pg_stat_statements, and next to
// a procedure, which DROP FUNCTION refused).
BOOST_AUTO_TEST_CASE(definitions_leave_extensions_and_procedures_in_the_schema_alone) {
  test::scratch_database database{"migext"};
  auto conn = database.connect();
  BOOST_REQUIRE(db::apply_migrations(conn, db::all_migrations()));
  BOOST_REQUIRE(conn.exec("CREATE EXTENSION pg_stat_statements SCHEMA taskmill"));
  BOOST_REQUIRE(conn.exec("CREATE EXTENSION tablefunc SCHEMA taskmill"));
  BOOST_REQUIRE(conn.exec("CREATE PROCEDURE taskmill.housekeeping() LANGUAGE sql AS 'SELECT 1'"));
  auto changed = db::all_definitions();
  changed.push_back(
      {"extra", "CREATE FUNCTION taskmill.answer() RETURNS int LANGUAGE sql AS 'SELECT 42';"});
  auto applied = db::apply_migrations(conn, db::all_migrations(), changed);
  BOOST_REQUIRE_MESSAGE(applied, test::describe(applied));
  BOOST_CHECK_EQUAL(database.scalar("SELECT taskmill.answer()"), "42");
  BOOST_CHECK_EQUAL(
      database.scalar("SELECT count(*) > 0 FROM pg_class WHERE relname = "
                      "'pg_stat_statements_info' AND relnamespace = 'taskmill'::regnamespace"),
      "t");
  BOOST_CHECK(conn.exec("CALL taskmill.housekeeping()"));
  BOOST_CHECK_EQUAL(database.scalar("SELECT count(*) FROM pg_type WHERE typname = "
                                    "'tablefunc_crosstab_2' AND typnamespace = "
                                    "'taskmill'::regnamespace"),
                    "1");
  BOOST_REQUIRE(conn.exec("DROP EXTENSION tablefunc"));
  BOOST_REQUIRE(conn.exec("DROP EXTENSION pg_stat_statements"));
}

BOOST_AUTO_TEST_CASE(a_database_of_the_releases_before_the_baseline_is_upgraded_in_place) {
  // A database made by the migrations 1 to 8 of earlier releases, with a task
  // of each kind in it, against one made afresh.
  test::scratch_database legacy{"legacy"};
  auto legacy_conn = legacy.connect();
  BOOST_REQUIRE_EQUAL(test::pre_baseline_migrations().size(), 8u);
  test::apply_pre_baseline_migrations(legacy_conn);
  legacy.exec("SELECT taskmill.submit('T', k::text) FROM generate_series(1, 3) k");
  legacy.exec("SELECT taskmill.cancel('T', '2')");
  auto upgraded = db::apply_migrations(legacy_conn, db::all_migrations());
  BOOST_REQUIRE_MESSAGE(upgraded, test::describe(upgraded));
  BOOST_CHECK_EQUAL(*upgraded, db::all_migrations().back().version);

  test::scratch_database fresh{"fresh"};
  auto fresh_conn = fresh.connect();
  BOOST_REQUIRE(db::apply_migrations(fresh_conn, db::all_migrations()));
  for (const char* catalog :
       {// functions, with their full text
        "SELECT string_agg(p.oid::regprocedure::text || ' ' || pg_get_functiondef(p.oid), "
        "E'\\n' ORDER BY p.oid::regprocedure::text) FROM pg_proc p "
        "WHERE p.pronamespace = 'taskmill'::regnamespace",
        // columns
        "SELECT string_agg(table_name || '.' || column_name || ' ' || data_type || ' ' || "
        "coalesce(column_default, '') || ' ' || is_nullable || ' ' || ordinal_position, "
        "E'\\n' ORDER BY table_name, ordinal_position) FROM information_schema.columns "
        "WHERE table_schema = 'taskmill'",
        // indexes, constraints, triggers, views
        "SELECT string_agg(indexdef, E'\\n' ORDER BY indexname) FROM pg_indexes "
        "WHERE schemaname = 'taskmill'",
        "SELECT string_agg(conrelid::regclass || ' ' || pg_get_constraintdef(oid), E'\\n' "
        "ORDER BY conrelid::regclass::text, pg_get_constraintdef(oid)) FROM pg_constraint "
        "WHERE connamespace = 'taskmill'::regnamespace",
        "SELECT string_agg(pg_get_triggerdef(t.oid), E'\\n' ORDER BY t.tgname, c.relname) "
        "FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid "
        "WHERE c.relnamespace = 'taskmill'::regnamespace AND NOT t.tgisinternal",
        "SELECT string_agg(viewname || ' ' || definition, E'\\n' ORDER BY viewname) "
        "FROM pg_views WHERE schemaname = 'taskmill'",
        "SELECT string_agg(c.relname || ' ' || array_to_string(c.reloptions, ','), E'\\n' "
        "ORDER BY c.relname) FROM pg_class c WHERE c.relnamespace = "
        "'taskmill'::regnamespace AND c.reloptions IS NOT NULL"}) {
    BOOST_TEST_CONTEXT(catalog) {
      BOOST_CHECK_EQUAL(legacy.scalar(catalog), fresh.scalar(catalog));
    }
  }
  // The rules work on what was there before, once a node wrote its defaults.
  test::write_default_type_settings(legacy_conn);
  BOOST_CHECK_EQUAL(legacy.scalar("SELECT (taskmill.submit('T', '1')).outcome"), "replaced");
  BOOST_CHECK_EQUAL(legacy.scalar("SELECT (taskmill.submit('T', '2')).outcome"), "created");
  BOOST_CHECK_EQUAL(legacy.scalar("SELECT count(*) FROM taskmill.task_keys"), "3");
  BOOST_CHECK_EQUAL(legacy.scalar("SELECT count(*) FROM taskmill.schema_migrations"),
                    std::to_string(db::all_migrations().size()));
}

BOOST_AUTO_TEST_SUITE_END()

// The hot-path functions keep their plans for the session. A plan is made
// with the statistics of its time: one made while the tables were known to be
// empty must not read whole tables once they are not (a batch submit whose
// kept plan joined the keys by a scan of all of them ran 13x slower at 100k
// tasks). Measured in buffers, against the same calls planned now.
BOOST_AUTO_TEST_SUITE(kept_plans)

namespace {

/// `n` tasks inserted (see task_database::insert_tasks) into a table that no
/// autovacuum touches, then analyzed: the index reads a statement makes are
/// its own, and the claimed tasks' entries stay until the test is over.
void load_still_tasks(const test::task_database& db, int n, const std::string& type,
                      const std::string& execute_at, const std::string& priority = "3") {
  db.exec("ALTER TABLE taskmill.live_tasks SET (autovacuum_enabled = false)");
  db.insert_tasks(n, type, execute_at, priority);
  db.exec("VACUUM ANALYZE taskmill.tasks");
}

/// What the task table's indexes count by `stat` (a pg_stat_get_xact_
/// function) in a transaction of `sql` alone; `sql` runs once before, so that
/// its planning is not counted.
int64_t task_index_stat_of(db::connection& conn, const std::string& sql, const char* stat) {
  BOOST_REQUIRE(conn.exec(sql));
  BOOST_REQUIRE(conn.exec("BEGIN"));
  BOOST_REQUIRE(conn.exec(sql));
  auto counted = conn.exec(std::string{"SELECT sum("} + stat +
                           "(i.indexrelid)) FROM pg_index i "
                           "WHERE i.indrelid = 'taskmill.live_tasks'::regclass");
  BOOST_REQUIRE_MESSAGE(counted, test::describe(counted));
  BOOST_REQUIRE(conn.exec("COMMIT"));
  return counted->int64(0, 0);
}

std::string submit_batch_of(const std::string& prefix, int n) {
  auto nulls = [n](const char* type) {
    return std::string{"array_fill(NULL::"} + type + ", ARRAY[" + std::to_string(n) + "])";
  };
  return "SELECT count(*) FROM taskmill.submit_batch(array_fill('T'::text, ARRAY[" +
         std::to_string(n) + "]), ARRAY(SELECT '" + prefix + "' || g FROM generate_series(1, " +
         std::to_string(n) + ") g), " + nulls("bigint") + ", " + nulls("jsonb") + ", " +
         nulls("timestamptz") + ", " + nulls("integer") + ", " + nulls("integer") + ", " +
         nulls("integer") + ", " + nulls("text") + ", " + nulls("integer") + ", " +
         nulls("integer") + ", " + nulls("real") + ", " + nulls("text") + ", " + nulls("text") +
         ", " + nulls("integer") + ", " + nulls("integer") + ")";
}

std::string submit_one_of(const std::string& key) {
  return "SELECT (taskmill.submit('T', '" + key + "')).outcome";
}

std::string claim_of(const std::string& node, int n) {
  auto quota = std::to_string(n);
  return "SELECT count(*) FROM taskmill.claim('" + node + "', " + quota + ", '{" + quota + "," +
         quota + "," + quota + "," + quota + "," + quota + "}', NULL, NULL, 0, NULL, NULL, NULL)";
}

/// The locks on days of stopped tasks and their indexes that `sql` takes,
/// run in a transaction of its own.
int64_t day_table_locks(db::connection& conn, const std::string& sql,
                        const std::vector<db::param>& params = {}) {
  BOOST_REQUIRE(conn.exec("BEGIN"));
  auto ran = conn.exec(sql, params);
  BOOST_REQUIRE_MESSAGE(ran, test::describe(ran));
  auto locks = conn.exec(
      "SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation "
      "WHERE l.pid = pg_backend_pid() AND c.relname LIKE 'stopped_tasks_2%'");
  BOOST_REQUIRE_MESSAGE(locks, test::describe(locks));
  BOOST_REQUIRE(conn.exec("COMMIT"));
  return locks->int64(0, 0);
}

std::string complete_running_of(const std::string& node) {
  auto running = "FROM taskmill.tasks WHERE status = 'running' AND picked_by = '" + node + "'";
  return "SELECT count(*) FROM (SELECT array_agg(id ORDER BY id) AS ids, array_agg(attempt ORDER "
         "BY id) AS attempts, count(*)::integer AS n " +
         running +
         ") r, taskmill.complete_many(r.ids, r.attempts, array_fill('succeeded'::text, "
         "ARRAY[r.n]), array_fill(NULL::jsonb, ARRAY[r.n]), array_fill(NULL::text, ARRAY[r.n]), "
         "'" +
         node + "')";
}

struct hot_path_buffers {
  int64_t submit_batch, submit, claim, complete;
};

hot_path_buffers measure(db::connection& conn, const std::string& node) {
  return {test::buffers_of(conn, submit_batch_of(node + "-batch-", 1000)),
          test::buffers_of(conn, submit_one_of(node + "-one")),
          test::buffers_of(conn, claim_of(node, 500)),
          test::buffers_of(conn, complete_running_of(node))};
}

}  // namespace

// SPEC §11: claims and outcomes never read a stopped task, however many
// there are: their statements name the statuses they read, and are planned
// against the live tasks alone.
BOOST_AUTO_TEST_CASE(claims_and_outcomes_read_no_stopped_task) {
  test::task_database db{"livealone"};
  db.insert_tasks(2000, "'S'", "now()");
  db.exec("UPDATE taskmill.tasks SET status = 'stopped'");
  db.insert_tasks(300, "'T'", "now() - interval '1 minute'");
  db.exec("VACUUM ANALYZE taskmill.tasks");
  auto conn = db.connect();
  BOOST_REQUIRE(conn.exec("BEGIN"));
  for (int round = 0; round < 3; ++round) {
    auto claimed = conn.exec(
        "SELECT coalesce(array_agg(id), '{}'), coalesce(array_agg(attempt), '{}') FROM "
        "taskmill.claim_by_turns('n1', 100, '{3,3,3,3,3}', '{}', '{}', 0, NULL, NULL, NULL)");
    BOOST_REQUIRE_MESSAGE(claimed, test::describe(claimed));
    auto done = conn.exec(
        "SELECT count(*) FILTER (WHERE applied) FROM taskmill.complete_many($1::bigint[], "
        "$2::int[], array_fill('succeeded'::text, ARRAY[cardinality($1::bigint[])]), NULL, NULL, "
        "'n1')",
        {claimed->string(0, 0), claimed->string(0, 1)});
    BOOST_REQUIRE_MESSAGE(done, test::describe(done));
    BOOST_CHECK_EQUAL(done->int64(0, 0), 100);
  }
  auto read = conn.exec(
      "SELECT sum(s.seq_scan + coalesce(s.idx_scan, 0)) FROM pg_stat_xact_user_tables s "
      "WHERE s.relid IN (SELECT p.relid FROM pg_partition_tree('taskmill.stopped_tasks') p)");
  BOOST_REQUIRE_MESSAGE(read, test::describe(read));
  BOOST_CHECK_EQUAL(read->int64(0, 0), 0);
  BOOST_REQUIRE(conn.exec("ROLLBACK"));
  BOOST_CHECK_EQUAL(db.scalar("SELECT count(*) FROM taskmill.stopped_tasks WHERE type = 'S'"),
                    "2000");
}

// A page of the task list that fills stops reading there: among 60,000
// tasks an unfiltered page of 10 touches a few buffers, not the 50,000 rows
// a page reads at most when its filter matches few.
BOOST_AUTO_TEST_CASE(a_full_page_of_the_task_list_reads_only_its_rows) {
  test::task_database db{"listpage"};
  load_still_tasks(db, 60000, "'T'", "now()");
  auto conn = db.connect();
  BOOST_REQUIRE(conn.exec(std::string{"PREPARE page AS "} + db::sql::list_tasks.sql));
  // Its first call makes the plan the session keeps.
  BOOST_REQUIRE(conn.exec("EXECUTE page(NULL, NULL, NULL, NULL, NULL, 11, 50000)"));
  auto full = test::buffers_of(conn, "EXECUTE page(NULL, NULL, NULL, NULL, NULL, 11, 50000)");
  auto none = test::buffers_of(conn, "EXECUTE page(NULL, 'NONE', NULL, NULL, NULL, 11, 50000)");
  BOOST_TEST_MESSAGE(full << " buffers for a full page, " << none << " for a page of no match");
  BOOST_CHECK_LT(full, 50);
  BOOST_CHECK_GT(none, 10 * full);
}

// A first page reads none of the index entries that the oldest tasks, moved
// on or deleted by the retention, leave until a vacuum (taskmill.tasks_before):
// beside 100,000 successes whose oldest 80,000 were deleted and not vacuumed,
// each reads under 60 buffers (4 to 16 here, 228 to 322 from the oldest end).
BOOST_AUTO_TEST_CASE(a_first_page_reads_none_of_the_oldest_tasks_deleted) {
  test::task_database db{"deletedfront"};
  db.insert_tasks(100000, "'T'", "now()");
  db.exec(
      "UPDATE taskmill.tasks SET status = 'succeeded', attempt = 1, picked_by = 'n1', "
      "started_at = now(), finished_at = now()");
  db.exec("VACUUM ANALYZE taskmill.tasks");
  db.exec("ALTER TABLE taskmill.succeeded_tasks SET (autovacuum_enabled = false)");
  db.exec("DELETE FROM taskmill.tasks WHERE id < (SELECT min(id) + 80000 FROM taskmill.tasks)");
  auto conn = db.connect();
  BOOST_REQUIRE(conn.exec(std::string{"PREPARE page AS "} + db::sql::list_tasks.sql));
  for (const char* filters : {"NULL, NULL, NULL", "NULL, NULL, 'succeeded'", "'T', NULL, NULL",
                              "'T', NULL, 'succeeded'"}) {
    auto page = std::string{"EXECUTE page("} + filters + ", NULL, NULL, 11, 50000)";
    for (int i = 0; i < 2; ++i) {
      auto listed = conn.exec(page);
      BOOST_REQUIRE_MESSAGE(listed, test::describe(listed));
      BOOST_CHECK_EQUAL(listed->rows(), 11);
    }
    auto buffers = test::buffers_of(conn, page);
    BOOST_TEST_MESSAGE(buffers << " buffers for a first page of " << filters);
    BOOST_CHECK_MESSAGE(buffers < 60, filters << ": " << buffers << " buffers");
  }
}

// A page of one type reads that type's tasks, not the history of other
// types before them: beside 100,000 successes of another type (a day's
// history within the success retention), 500 running tasks and a backlog
// of 20,000 waiting tasks of a third type, a page of each status reads
// under 300 buffers (about 70 at most here), where the bounded scan read
// 50,000 rows (3,000 buffers) and handed on a token.
BOOST_AUTO_TEST_CASE(a_page_of_one_type_reads_its_own_tasks_beside_another_types_history) {
  test::task_database db{"typepage"};
  db.exec("ALTER TABLE taskmill.live_tasks SET (autovacuum_enabled = false)");
  db.insert_tasks(100000, "'HISTORY'", "now()");
  db.exec(
      "UPDATE taskmill.tasks SET status = 'succeeded', attempt = 1, picked_by = 'n1', "
      "started_at = now(), finished_at = now()");
  db.insert_tasks(500, "'BUSY'", "now()");
  db.exec(
      "UPDATE taskmill.tasks SET status = 'running', attempt = 1, picked_by = 'n1', "
      "started_at = now() WHERE type = 'BUSY'");
  db.insert_tasks(20000, "'BACKLOG'", "now()");
  db.insert_tasks(70, "'T'", "now()");
  db.exec(every_status_by_id("type = 'T'"));
  db.exec("VACUUM ANALYZE taskmill.tasks");
  auto conn = db.connect();
  BOOST_REQUIRE(conn.exec(std::string{"PREPARE page AS "} + db::sql::list_tasks.sql));
  for (const char* status : {"NULL", "'pending'", "'failed'", "'running'", "'succeeded'", "'dead'",
                             "'cancelled'", "'stopped'"}) {
    auto page = std::string{"EXECUTE page('T', NULL, "} + status + ", NULL, NULL, 11, 50000)";
    auto listed = conn.exec(page);
    BOOST_REQUIRE_MESSAGE(listed, test::describe(listed));
    BOOST_CHECK_EQUAL(listed->rows(), std::string{status} == "NULL" ? 11 : 10);
    auto buffers = test::buffers_of(conn, page);
    BOOST_TEST_MESSAGE(buffers << " buffers for a page of T, status " << status);
    BOOST_CHECK_MESSAGE(buffers < 300, "status " << status << ": " << buffers << " buffers");
  }
}

// Stopped tasks lie in a table a day: a read of tasks that cannot name a
// status would be planned against a month of day tables at every call. The
// plan made once serves any task.
BOOST_AUTO_TEST_CASE(the_task_reads_plan_the_day_tables_once_a_session) {
  test::task_database db{"readplans"};
  db.exec("SELECT taskmill.make_stopped_days(current_date - 30, current_date - 1)");
  load_still_tasks(db, 20000, "'T'", "now()");
  // Half of them a history of successes (whose attempts are their rows).
  db.exec(
      "UPDATE taskmill.tasks SET status = 'succeeded', attempt = 1, picked_by = 'n', "
      "started_at = now(), finished_at = now() WHERE id % 2 = 0");
  db.exec("VACUUM ANALYZE taskmill.tasks");
  auto conn = db.connect();
  auto first = conn.exec("SELECT min(id) FROM taskmill.tasks");
  BOOST_REQUIRE(first);
  auto id = first->string(0, 0);
  const std::vector<std::pair<const db::statement*, std::string>> reads{
      {&db::sql::get_task, "(" + id + ")"},
      {&db::sql::task_status, "(" + id + ")"},
      {&db::sql::task_attempts, "(" + id + ")"},
      {&db::sql::list_tasks, "(NULL, NULL, NULL, NULL, NULL, 11, 50000)"},
      {&db::sql::list_tasks, "('T', NULL, 'pending', NULL, NULL, 11, 50000)"},
      {&db::sql::list_tasks, "('T', NULL, 'stopped', NULL, NULL, 11, 50000)"},
      {&db::sql::list_unit_tasks, "('T', 'k1', NULL, NULL, NULL, 11)"},
      {&db::sql::batch_counts, "('b')"}};
  for (const auto& [read, args] : reads) {
    std::string name = read->name;
    BOOST_REQUIRE(conn.exec("DEALLOCATE ALL"));
    BOOST_REQUIRE(conn.exec("PREPARE " + name + " AS " + read->sql));
    auto plan = conn.exec("EXPLAIN (FORMAT JSON) EXECUTE " + name + args);
    BOOST_REQUIRE_MESSAGE(plan, test::describe(plan));
    BOOST_CHECK_MESSAGE(plan->string(0, 0).find("stopped_tasks_") == std::string::npos,
                        name << " plans the day tables at each call");
    for (int i = 0; i < 2; ++i) BOOST_REQUIRE(conn.exec("EXECUTE " + name + args));
    // A plan for any task reads its own rows, not the table (a page of a type
    // with 10,000 waiting tasks also counts 1,001 of them in their index).
    auto buffers = test::buffers_of(conn, "EXECUTE " + name + args);
    BOOST_CHECK_MESSAGE(buffers < 150, name << args << " read " << buffers << " buffers");
  }
  // What each function reads the tasks with, planned once and kept.
  for (const char* statement : {"WITH page AS", "t.status <> 'stopped'", "c.status = 'cancelled'",
                                "t.status::text, count(*)", "taskmill.attempt_history",
                                "(t.type, t.id) < (p_type, p_before)"}) {
    auto kept = conn.exec(
        "SELECT count(*) FROM pg_backend_memory_contexts WHERE name = 'CachedPlan' AND "
        "strpos(ident, $1) > 0",
        {std::string{statement}});
    BOOST_REQUIRE_MESSAGE(kept, test::describe(kept));
    BOOST_CHECK_MESSAGE(kept->int64(0, 0) > 0, "no plan kept of " << statement);
  }
}

// A plan kept for a statement that reads tasks by id locks every day's table
// at each call: a submit of a new unit, a duplicate of a live task, or one
// that replaces a waiting task, reads no day.
BOOST_AUTO_TEST_CASE(submits_of_new_units_and_duplicates_of_live_tasks_lock_no_day_table) {
  test::task_database db{"newunit"};
  db.exec("SELECT taskmill.make_stopped_days(current_date - 30, current_date - 1)");
  auto conn = db.connect();
  for (int i = 1; i <= 3; ++i)
    BOOST_CHECK_EQUAL(day_table_locks(conn, submit_one_of("new-" + std::to_string(i))), 0);
  db.exec(
      "UPDATE taskmill.tasks SET status = 'succeeded', attempt = 1, picked_by = 'n', "
      "started_at = now(), finished_at = now() WHERE key IN ('new-1', 'new-2')");
  db.exec("UPDATE taskmill.tasks SET status = 'stopped' WHERE key = 'new-2'");
  // A duplicate of a live success, then of a stopped one.
  for (int i = 1; i <= 3; ++i) BOOST_CHECK_EQUAL(day_table_locks(conn, submit_one_of("new-1")), 0);
  // A replacing submit plans its update for the task at hand; once a session
  // it also plans one for any task (to weigh a kept plan), which locks the days.
  int replaces_locking_days = 0;
  for (int i = 1; i <= 10; ++i) {
    BOOST_CHECK_EQUAL(db.scalar(submit_one_of("new-3")), "replaced");
    if (day_table_locks(conn, submit_one_of("new-3")) > 0) ++replaces_locking_days;
  }
  BOOST_CHECK_LE(replaces_locking_days, 1);
  db.exec("UPDATE taskmill.tasks SET status = 'failed', retry_count = 1 WHERE key = 'new-3'");
  BOOST_CHECK_EQUAL(day_table_locks(conn, submit_one_of("new-3")), 0);
  BOOST_CHECK_GT(day_table_locks(conn, submit_one_of("new-2")), 0);
  BOOST_CHECK_EQUAL(db.scalar("SELECT status FROM taskmill.tasks WHERE key = 'new-2'"), "pending");
}

// The same for what a drain runs: under a purge retention of 30 days, a kept
// plan that names no status locks 33 day tables and their 132 indexes at each
// call, past the 16 relations a backend locks on the lock manager's fast
// path (what that costs a drain: tools/bench/BENCH.md).
BOOST_AUTO_TEST_CASE(claims_and_outcomes_lock_no_day_table) {
  test::task_database db{"drainlocks"};
  db.exec("SELECT taskmill.make_stopped_days(current_date - 30, current_date - 1)");
  db.insert_tasks(400, "'T'", "now() - interval '1 minute'");
  auto conn = db.connect();
  const std::string claim =
      "CREATE TEMP TABLE claimed ON COMMIT DROP AS SELECT id, attempt FROM "
      "taskmill.claim_by_turns('n1', 100, '{3,3,3,3,3}', '{}', '{}', 0, NULL, NULL, NULL)";
  const std::string claimed =
      "SELECT array_agg(id ORDER BY id), array_agg(attempt ORDER BY id) "
      "FROM taskmill.tasks WHERE status = 'running'";
  const std::string complete =
      "SELECT count(*) FILTER (WHERE applied) FROM taskmill.complete_many($1::bigint[], "
      "$2::int[], array_fill('succeeded'::text, ARRAY[cardinality($1::bigint[])]), NULL, NULL, "
      "'n1')";
  for (int round = 0; round < 3; ++round) {
    BOOST_CHECK_EQUAL(day_table_locks(conn, claim), 0);
    auto ran = conn.exec(claimed);
    BOOST_REQUIRE_MESSAGE(ran, test::describe(ran));
    BOOST_CHECK_EQUAL(day_table_locks(conn, complete, {ran->string(0, 0), ran->string(0, 1)}), 0);
  }
  BOOST_CHECK_EQUAL(db.scalar("SELECT count(*) FROM taskmill.tasks WHERE status = 'succeeded'"),
                    "300");
  // An outcome of an attempt that is over reads what became of its task,
  // whatever its status, days of stopped tasks included.
  auto done = conn.exec("SELECT id FROM taskmill.tasks WHERE status = 'succeeded' LIMIT 1");
  BOOST_REQUIRE(done && done->rows() == 1);
  auto stale = conn.exec(
      "SELECT applied, status FROM taskmill.complete_many(ARRAY[$1::bigint], '{1}', "
      "'{succeeded}', NULL, NULL, 'n1')",
      {done->string(0, 0)});
  BOOST_REQUIRE_MESSAGE(stale, test::describe(stale));
  BOOST_CHECK_EQUAL(stale->string(0, 0), "f");
  BOOST_CHECK_EQUAL(stale->string(0, 1), "succeeded");
}

// SPEC §2: an outcome is fenced by its attempt, also beside an outcome of the
// task's current attempt in the same batch.
BOOST_AUTO_TEST_CASE(an_outcome_of_an_earlier_attempt_beside_the_current_one_does_not_apply) {
  test::task_database db{"twoattempts"};
  auto task = db.call("submit('T', 'twice')");
  BOOST_REQUIRE_EQUAL(db.claim(1).size(), 1u);
  db.exec("UPDATE taskmill.tasks SET attempt = 2 WHERE key = 'twice'");
  auto answered = db.scalar(
      "SELECT string_agg(concat_ws(':', attempt, applied, status), ',' ORDER BY attempt) FROM "
      "taskmill.complete_many(ARRAY[" +
      std::to_string(task.id) + ", " + std::to_string(task.id) +
      "]::bigint[], '{1,2}', '{retry,succeeded}', NULL, NULL, 'n1')");
  BOOST_CHECK_EQUAL(answered, "1:f:succeeded,2:t:succeeded");
}

BOOST_AUTO_TEST_CASE(plans_kept_from_empty_tables_cost_what_plans_made_now_do) {
  test::task_database db{"keptplans"};
  // Known to be empty, and no autovacuum to bring the statistics up to date
  // (which would make the kept plans anew) while the test runs.
  db.exec("VACUUM ANALYZE taskmill.tasks, taskmill.task_keys");
  db.exec("ALTER TABLE taskmill.live_tasks SET (autovacuum_enabled = false)");
  db.exec("ALTER TABLE taskmill.task_keys SET (autovacuum_enabled = false)");
  auto early = db.connect();
  for (const auto& sql : {submit_batch_of("early-", 1), claim_of("early", 1),
                          complete_running_of("early"), submit_one_of("early-one")})
    BOOST_REQUIRE(early.exec(sql));
  db.insert_tasks(60000, "'T'", "now() - interval '1 minute'");

  auto kept = measure(early, "early");
  auto late = db.connect();
  auto now = measure(late, "late");
  BOOST_TEST_MESSAGE("buffers, kept / planned now: submit_batch "
                     << kept.submit_batch << " / " << now.submit_batch << ", submit " << kept.submit
                     << " / " << now.submit << ", claim " << kept.claim << " / " << now.claim
                     << ", complete " << kept.complete << " / " << now.complete);
  BOOST_CHECK_LE(kept.submit_batch, 2 * now.submit_batch + 100);
  BOOST_CHECK_LE(kept.submit, 2 * now.submit + 100);
  BOOST_CHECK_LE(kept.claim, 2 * now.claim + 100);
  BOOST_CHECK_LE(kept.complete, 2 * now.complete + 100);
}

// Claims take the oldest due tasks first and leave their index entries
// behind until a vacuum; the due-level probe of every claim reads from the
// newest due task backwards, so those entries are not in its way. Nor, for
// a node of some types, is the oldest end probed while no other type has
// tasks queued.
BOOST_AUTO_TEST_CASE(the_due_level_probe_does_not_step_over_claimed_tasks) {
  test::task_database db{"probe"};
  load_still_tasks(db, 20000, "'T'", "now() - interval '1 minute'");
  auto conn = db.connect();
  BOOST_REQUIRE(conn.exec(claim_of("n", 19000)));
  for (const std::string types : {"NULL", "'{T,U}'"}) {
    BOOST_TEST_CONTEXT("types " << types) {
      auto probe = "SELECT taskmill.due_levels(" + types + ", 'n')";
      // Its plans made first: their making reads the catalogs.
      BOOST_REQUIRE(conn.exec(probe));
      auto buffers = test::buffers_of(conn, probe);
      BOOST_TEST_MESSAGE("buffers of the probe after 19000 claims: " << buffers);
      BOOST_CHECK_LE(buffers, 50);
      BOOST_CHECK_EQUAL(db.scalar(probe + "::text"), "{3}");
    }
  }
}

// The leader's success sweep finds finished tasks through their index and
// changes them by id. Statistics taken before the tasks finished (a drain's
// first minute, before autovacuum analyzes) count that index empty: a change
// that named the tasks' status was then planned to read every finished task
// through it, at every sweep (seconds at a million).
BOOST_AUTO_TEST_CASE(
    the_success_sweep_reads_few_buffers_beside_tasks_finished_since_the_last_analyze) {
  test::task_database db{"stalesweeps"};
  load_still_tasks(db, 20000, "'T'", "now() - interval '1 minute'");
  db.exec("UPDATE taskmill.tasks SET status = 'succeeded', attempt = 1, finished_at = now()");
  auto conn = db.connect();
  auto call = "SELECT taskmill.sweep_succeeded(86400000, 1000, " + db.seize_lead() + ")";
  BOOST_REQUIRE(conn.exec(call));
  auto buffers = test::buffers_of(conn, call);
  BOOST_TEST_MESSAGE("the success sweep: " << buffers << " buffers beside 20000 finished tasks");
  BOOST_CHECK_LE(buffers, 100);
}

// The oldest ends are probed only where tasks of types the node does not run
// are queued: those are found before, between and after its types in order,
// finished ones do not count, and past 16 types they are taken as there.
BOOST_AUTO_TEST_CASE(other_types_queued_are_found_in_every_gap_between_a_nodes_types) {
  test::task_database db{"othersqueued"};
  auto others = [&](const std::string& types) {
    return db.scalar("SELECT taskmill.others_queued('" + types + "')::text");
  };
  db.insert_tasks(3, "'M'", "now()");
  db.insert_tasks(3, "'Q'", "now()");
  db.exec("UPDATE taskmill.tasks SET status = 'succeeded' WHERE type = 'Q'");
  BOOST_CHECK_EQUAL(others("{M}"), "false");
  BOOST_CHECK_EQUAL(others("{A,M,Z}"), "false");
  db.insert_tasks(1, "'C'", "now() + interval '1 day'");
  BOOST_CHECK_EQUAL(others("{M}"), "true");
  BOOST_CHECK_EQUAL(others("{A,M}"), "true");
  BOOST_CHECK_EQUAL(others("{M,C}"), "false");
  db.insert_tasks(1, "'X'", "now()");
  BOOST_CHECK_EQUAL(others("{C,M}"), "true");
  BOOST_CHECK_EQUAL(others("{X,C,M}"), "false");
  BOOST_CHECK_EQUAL(others("{A,C,D,E,F,G,H,I,J,K,L,M,N,O,P,R,X}"), "true");
}

// In a level whose newest due task is of a type the node does not run, the
// probe asks the node's types one by one, each read only in that level: not
// the other types' tasks of the level, nor the type's own of other levels
// (bounded by row comparisons, PostgreSQL 15 read those).
BOOST_AUTO_TEST_CASE(the_due_level_probe_of_a_type_list_reads_each_type_in_its_level) {
  test::task_database db{"typeprobe"};
  load_still_tasks(db, 20001,
                   "CASE WHEN g <= 10000 THEN 'MINE' WHEN g <= 20000 THEN 'BACKLOG' "
                   "ELSE 'OTHER' END",
                   "now() - CASE WHEN g <= 20000 THEN interval '1 minute' "
                   "ELSE interval '2 minutes' END",
                   "CASE WHEN g <= 10000 THEN 1 ELSE 3 END");
  auto conn = db.connect();
  // Its plans made first: their making reads the catalogs.
  BOOST_REQUIRE(conn.exec("SELECT taskmill.due_levels('{MINE,OTHER}', 'n')"));
  auto buffers = test::buffers_of(conn, "SELECT taskmill.due_levels('{MINE,OTHER}', 'n')");
  BOOST_TEST_MESSAGE("buffers of the probe: " << buffers);
  BOOST_CHECK_LE(buffers, 40);
  BOOST_CHECK_EQUAL(db.scalar("SELECT taskmill.due_levels('{MINE,OTHER}', 'n')::text"), "{1,3}");
  BOOST_CHECK_EQUAL(db.scalar("SELECT taskmill.due_levels('{MINE}', 'n')::text"), "{1}");
}

// Nodes of the release before read each task of a batch submit as one
// composite column (taskmill.submit_many) until they are restarted on this
// one: whole tasks, as stored, for new units and units taken one by one.
BOOST_AUTO_TEST_CASE(nodes_of_the_release_before_submit_batches_as_they_did) {
  test::task_database db{"oldsubmit"};
  db.exec("SELECT taskmill.submit('T', 'there')");
  auto conn = db.connect();
  BOOST_REQUIRE(conn.exec(
      "CREATE TEMP TABLE answered AS SELECT * FROM taskmill.submit_many(ARRAY['T', 'T', 'T', "
      "'T'], ARRAY['new', 'there', 'twice', 'twice'], ARRAY[0, 0, 0, 1]::bigint[], NULL, NULL, "
      "NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)"));
  auto res = conn.exec(
      "SELECT concat_ws(' ', a.ordinal, a.outcome, (a.task).key, (a.task).version, "
      "(a.task).status, (a.task)::text = t::text) FROM answered a "
      "JOIN taskmill.tasks t ON t.id = (a.task).id ORDER BY a.ordinal");
  BOOST_REQUIRE_MESSAGE(res, test::describe(res));
  std::vector<std::string> answers;
  for (int row = 0; row < res->rows(); ++row) answers.push_back(res->string(row, 0));
  // The first version of the unit given twice was superseded by the second
  // in the same batch: it was answered as it stood then.
  std::vector<std::string> expected{"1 created new 0 pending t", "2 replaced there 0 pending t",
                                    "3 created twice 0 pending f", "4 created twice 1 pending t"};
  BOOST_TEST(answers == expected, boost::test_tools::per_element());
}

// A kept plan does not know a claim's LIMIT: at a million due tasks its
// estimate passed jit_above_cost and every claim spent 5 ms compiling. The
// node's connections compile nothing, however costly a plan looks.
BOOST_AUTO_TEST_CASE(node_connections_compile_no_plans) {
  test::task_database db{"nojit"};
  auto conn = db.connect();
  BOOST_REQUIRE(conn.exec("SET jit_above_cost = 0"));
  auto plan = conn.exec("EXPLAIN (ANALYZE, FORMAT JSON) SELECT count(*) FROM taskmill.tasks");
  BOOST_REQUIRE_MESSAGE(plan, test::describe(plan));
  BOOST_CHECK_EQUAL(nlohmann::json::parse(plan->string(0, 0))[0].count("JIT"), 0u);
}

// Batch submits, claims and the leader's sweeps compile nothing inside,
// whatever the caller's session asks: without nested loops a batch insert's
// kept plan costs more than jit_above_cost, and a session with JIT on
// compiled it at every call (0.1 s). The statements inside are seen through
// auto_explain's notices.
BOOST_AUTO_TEST_CASE(batch_submits_claims_and_sweeps_compile_no_plans_for_sessions_with_jit_on) {
  test::task_database db{"submitjit"};
  std::unique_ptr<PGconn, decltype(&PQfinish)> conn{PQconnectdb(db.conninfo().c_str()), &PQfinish};
  BOOST_REQUIRE_EQUAL(PQstatus(conn.get()), CONNECTION_OK);
  std::vector<std::string> plans;
  PQsetNoticeReceiver(
      conn.get(),
      [](void* to, const PGresult* notice) {
        static_cast<std::vector<std::string>*>(to)->push_back(PQresultErrorMessage(notice));
      },
      &plans);
  auto run = [&](const std::string& sql) {
    std::unique_ptr<PGresult, decltype(&PQclear)> res{PQexec(conn.get(), sql.c_str()), &PQclear};
    auto status = PQresultStatus(res.get());
    BOOST_REQUIRE_MESSAGE(status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK,
                          sql << ": " << PQresultErrorMessage(res.get()));
  };
  for (auto sql :
       {"LOAD 'auto_explain'", "SET auto_explain.log_min_duration = 0",
        "SET auto_explain.log_nested_statements = on", "SET auto_explain.log_analyze = on",
        "SET auto_explain.log_level = notice", "SET jit = on", "SET jit_above_cost = 0"})
    run(sql);
  auto compiled = [](const std::string& plan) { return plan.find("JIT:") != std::string::npos; };
  struct call {
    std::string sql;
    std::string function;
  };
  // The claim takes one task of the limited type and the other type's beside
  // it, the way that merges them.
  for (const auto& [sql, function] :
       {call{"SELECT count(*) FROM taskmill.submit_batch(ARRAY['CAPPED', 'CAPPED', 'OTHER'], "
             "ARRAY['a', 'b', 'c'], NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, "
             "NULL, NULL, NULL, NULL)",
             "submit_batch"},
        call{"SELECT count(*) FROM taskmill.claim_by_turns('n', 3, '{3,3,3}', '{CAPPED}', '{1}', "
             "0, NULL, NULL, NULL)",
             "claim_by_turns"}}) {
    BOOST_TEST_CONTEXT(function) {
      plans.clear();
      run(sql);
      auto is_the_call = [&](const std::string& plan) {
        return plan.find("Function Scan on " + function + " ") != std::string::npos;
      };
      auto top = std::find_if(plans.begin(), plans.end(), is_the_call);
      // The session compiles what it runs itself: JIT is there to be refused.
      BOOST_REQUIRE(top != plans.end());
      BOOST_REQUIRE(compiled(*top));
      BOOST_REQUIRE_GE(plans.size(), 4u);
      for (const auto& plan : plans)
        if (!is_the_call(plan)) BOOST_CHECK_MESSAGE(!compiled(plan), plan);
    }
  }
  // A page by type rules sorts out, which puts its plan's cost past every
  // JIT threshold: compiled, it took seconds a call.
  plans.clear();
  run("SELECT count(*) FROM taskmill.type_tasks_before('OTHER', NULL, '{}', 1000000, 11)");
  auto page = std::find_if(plans.begin(), plans.end(), [](const std::string& plan) {
    return plan.find("taskmill.succeeded_tasks t") != std::string::npos;
  });
  BOOST_REQUIRE(page != plans.end());
  BOOST_CHECK_MESSAGE(!compiled(*page), *page);
  BOOST_CHECK_EQUAL(db.scalar("SELECT string_agg(type, ',' ORDER BY type) FROM taskmill.tasks "
                              "WHERE status = 'running'"),
                    "CAPPED,OTHER");
  // The leader's sweeps, behind a transaction pooler, run in sessions the
  // node cannot set: with JIT on, one compiled its plan at every call.
  auto term = db.seize_lead();
  for (std::string function : {"sweep_lost(60000, 100", "sweep_timeouts(1000, 100",
                               "sweep_silent(100", "sweep_deadlines(100", "sweep_succeeded(0, 100",
                               "sweep_purge(0, 100", "sweep_repin(60000, 100"}) {
    auto name = function.substr(0, function.find('('));
    BOOST_TEST_CONTEXT(name) {
      plans.clear();
      run("SELECT count(*) FROM taskmill." + function + ", " + term + ")");
      auto is_the_call = [&](const std::string& plan) {
        return plan.find("Function Scan on " + name) != std::string::npos;
      };
      BOOST_REQUIRE_GE(plans.size(), 2u);
      for (const auto& plan : plans)
        if (!is_the_call(plan)) BOOST_CHECK_MESSAGE(!compiled(plan), plan);
    }
  }
}

// A claim under a type's running limit looks for that type's due tasks only,
// however many of other types come before them in claim order.
BOOST_AUTO_TEST_CASE(a_claim_under_a_type_limit_does_not_read_other_types_due_tasks) {
  test::task_database db{"bytype"};
  load_still_tasks(db, 3010, "CASE WHEN g <= 3000 THEN 'other' ELSE 'capped' END",
                   "now() - interval '1 hour' + g * interval '1 ms'");
  auto conn = db.connect();
  auto claim_of_five = std::string{
      "SELECT count(*) FROM taskmill.claim_by_turns('n', 5, '{3,3,3,3,3}', '{capped}', '{10}', "
      "0, '{capped}', NULL, NULL)"};
  auto entries = task_index_stat_of(conn, claim_of_five, "pg_stat_get_xact_tuples_returned");
  BOOST_TEST_MESSAGE(
      "index entries read by a claim of 5 capped tasks behind 3000 others: " << entries);
  BOOST_CHECK_LE(entries, 200);
  // Two claims of five (see task_index_stat_of), of the capped type only.
  BOOST_CHECK_EQUAL(db.scalar("SELECT string_agg(type || ':' || n, ',') FROM (SELECT type, "
                              "count(*) AS n FROM taskmill.tasks WHERE status = 'running' "
                              "GROUP BY type) r"),
                    "capped:10");
}

// The last step of a claim fills what room is left in claim order over all
// levels; for a type with a running limit it reads each level only up to now,
// not through the tasks of that type due later.
BOOST_AUTO_TEST_CASE(a_claim_under_a_type_limit_does_not_read_its_tasks_due_later) {
  test::task_database db{"bytypelater"};
  load_still_tasks(db, 20010, "'capped'",
                   "CASE WHEN g <= 20000 THEN now() + interval '1 day' "
                   "ELSE now() - interval '1 minute' END",
                   "CASE WHEN g <= 20005 THEN 2 ELSE 3 END");
  auto conn = db.connect();
  // One turn each for levels 2 and 3, the rest of the room in claim order.
  auto claim = std::string{
      "SELECT count(*) FROM taskmill.claim_by_turns('n', 4, '{2,3}', '{capped}', '{100}', 0, "
      "'{capped}', NULL, NULL)"};
  // Index pages read: about 150 for the claim itself (its probe of the
  // queued types among them), a hundred more when it reads through the
  // entries of the tasks due later.
  auto pages = task_index_stat_of(conn, claim, "pg_stat_get_xact_blocks_fetched");
  BOOST_TEST_MESSAGE("index pages read by a claim beside 20000 tasks due later: " << pages);
  BOOST_CHECK_LE(pages, 190);
  BOOST_CHECK_EQUAL(db.scalar("SELECT string_agg(priority || ':' || n, ',' ORDER BY priority) "
                              "FROM (SELECT priority, count(*) AS n FROM taskmill.tasks "
                              "WHERE status = 'running' GROUP BY priority) r"),
                    "2:5,3:3");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(task_reads)

namespace {

/// The rows of the node's `read` with `params`, each made by `row` (an SQL
/// expression over its columns), comma-separated in the order `read` gives
/// them or by `order`.
std::string rows_of(const test::task_database& db, const db::statement& read,
                    const std::string& row, const std::vector<db::param>& params,
                    const std::string& order = "row_order") {
  return db.scalar("SELECT coalesce(string_agg(" + row + ", ',' ORDER BY " + order +
                       "), '') FROM (SELECT r.*, row_number() OVER () AS row_order FROM (" +
                       read.sql + ") r) r",
                   params);
}

/// The ids the task list gives, comma-separated, and how many pages it took.
struct listing {
  std::string ids;
  int pages = 0;
};

/// What the task list gives for `type` and `status` in pages of `limit`,
/// following its page tokens as the node reads them.
listing list_ids(const test::task_database& db, const db::param& type, const db::param& status,
                 int limit, int scan) {
  listing out;
  db::param before;
  while (++out.pages < 1000) {
    auto page = db::read_scanned_task_page(
        db.exec(db::sql::list_tasks.sql, {type, db::param{}, status, db::param{}, before,
                                          std::to_string(limit + 1), std::to_string(scan)}),
        limit, scan);
    for (const auto& task : page.tasks()) {
      if (!out.ids.empty()) out.ids += ',';
      out.ids += std::to_string(task.id());
    }
    if (page.next_page_token().empty()) return out;
    before = page.next_page_token();
  }
  BOOST_FAIL("the task list's pages never end");
  return out;
}

}  // namespace

// Nodes of generation 23 and before list oldest first, after their page
// token (storage/sql/compat.sql): a page of every task, of a type (read by
// type) and of a unit.
BOOST_AUTO_TEST_CASE(nodes_of_generation_23_still_list_oldest_first) {
  test::task_database db{"oldpages"};
  auto first = db.call("submit('T', 'a')");
  db.call("submit('T', 'b')");
  db.call("submit('T', 'c')");
  // In the order the function gives them.
  auto keys = [&](const std::string& rows) {
    return db.scalar("SELECT string_agg(r.key, ',') FROM (SELECT (t.task).key FROM " + rows +
                     " t) r");
  };
  auto after_first = std::to_string(first.id);
  BOOST_CHECK_EQUAL(keys("taskmill.task_page(NULL, NULL, NULL, NULL, 0, 2, 50000)"), "a,b");
  BOOST_CHECK_EQUAL(
      keys("taskmill.task_page('T', NULL, NULL, NULL, " + after_first + ", 2, 50000)"), "b,c");
  BOOST_CHECK_EQUAL(db.scalar("SELECT string_agg(t.key, ',') FROM "
                              "taskmill.unit_task_page('T', 'b', NULL, NULL, 0, 2) t"),
                    "b");
}

// The finished counts stand apart from the live ones so that a node can hold
// an estimate of them (storage/finished_estimate.hpp); nodes of generation
// 21 and before still read every count in one call (storage/sql/compat.sql).
BOOST_AUTO_TEST_CASE(finished_counts_say_whether_a_sample_came_with_them) {
  test::task_database db{"finishedcounts"};
  db.call("submit('T', 'waits')");
  db.call("submit('T', 'done')");
  db.exec("UPDATE taskmill.tasks SET status = 'succeeded' WHERE key = 'done'");
  auto counts = [&](const std::string& call) {
    return db.scalar(
        "SELECT coalesce(string_agg(concat_ws(':', coalesce(type, '-'), status, n, "
        "estimated), ',' ORDER BY type NULLS FIRST, status), '') FROM " +
        call);
  };
  BOOST_CHECK_EQUAL(counts("taskmill.finished_counts(100000, false)"), "T:succeeded:1:f");
  BOOST_CHECK_EQUAL(counts("taskmill.status_counts(100000)"), "T:pending:1:f,T:succeeded:1:f");
  // Past the rows counted exactly (2 by the statistics): a row without a
  // type, then the sample, of every page of a table this small.
  db.exec("ANALYZE taskmill.tasks");
  BOOST_CHECK_EQUAL(counts("taskmill.finished_counts(2, false)"), "-:f");
  BOOST_CHECK_EQUAL(counts("taskmill.finished_counts(2, true)"), "-:t,T:succeeded:1:t");
  BOOST_CHECK_EQUAL(counts("taskmill.status_counts(2)"), "T:pending:1:f,T:succeeded:1:t");
  // A stopped task lies two levels down, in its day's table: its row counts
  // towards the bound as well.
  db.call("submit('T', 'stops')");
  db.exec("UPDATE taskmill.tasks SET status = 'stopped' WHERE key = 'stops'");
  db.exec("ANALYZE taskmill.tasks");
  BOOST_CHECK_EQUAL(counts("taskmill.finished_counts(3, false)"), "-:f");
  BOOST_CHECK_EQUAL(counts("taskmill.finished_counts(4, false)"), "T:stopped:1:f,T:succeeded:1:f");
}

// SPEC §4: processed and failed records sum per batch, beside its counts.
BOOST_AUTO_TEST_CASE(a_batch_counts_its_statuses_and_sums_its_records) {
  test::task_database db{"batchreads"};
  for (const auto* key : {"b1", "b2", "b3"})
    db.call(std::string{"submit('T', '"} + key + "', batch => 'b')");
  db.call("submit('T', 'other', batch => 'o')");
  auto claimed = db.claim(2);
  BOOST_REQUIRE_EQUAL(claimed.size(), 2u);
  std::vector<std::pair<int, int>> records{{100, 6}, {50, 1}};
  for (size_t i = 0; i < claimed.size(); ++i)
    BOOST_CHECK_EQUAL(
        db.scalar("SELECT applied::text FROM taskmill.report_progress(ARRAY[$1::bigint], "
                  "ARRAY[$2::int], ARRAY[NULL::real], ARRAY[$3::bigint], ARRAY[$4::bigint], "
                  "ARRAY[NULL])",
                  {std::to_string(claimed[i].id), std::to_string(claimed[i].attempt),
                   std::to_string(records[i].first), std::to_string(records[i].second)}),
        "true");
  BOOST_REQUIRE(db.complete(claimed[0].id, claimed[0].attempt, "succeeded"));
  BOOST_CHECK_EQUAL(
      rows_of(db, db::sql::batch_counts, "status || ':' || n || ':' || processed || ':' || failed",
              {"b"}, "status"),
      "pending:1:0:0,running:1:50:1,succeeded:1:100:6");
  BOOST_CHECK_EQUAL(rows_of(db, db::sql::batch_counts, "status", {"none"}), "");
}

// A unit's page holds every version of it once, newest first: the cancelled
// ones (which hold no key) and the stopped ones (in a day's table).
BOOST_AUTO_TEST_CASE(a_units_page_holds_its_cancelled_and_stopped_versions_once) {
  test::task_database db{"unitreads"};
  auto first = db.call("submit('T', 'u')");
  auto second = db.call("submit('T', 'u', version => 1)");
  db.call("submit('T', 'other')");
  db.exec(
      "UPDATE taskmill.tasks SET status = 'succeeded', attempt = 1, picked_by = 'n', "
      "started_at = now(), finished_at = now() WHERE id = $1",
      {std::to_string(second.id)});
  db.exec("UPDATE taskmill.tasks SET status = 'stopped' WHERE id = $1",
          {std::to_string(second.id)});
  auto page = [&](db::param status, db::param before) {
    return rows_of(db, db::sql::list_unit_tasks, "status::text",
                   {"T", "u", std::move(status), db::param{}, std::move(before), "11"});
  };
  BOOST_CHECK_EQUAL(page(db::param{}, db::param{}), "stopped,cancelled");
  BOOST_CHECK_EQUAL(page(db::param{"cancelled"}, db::param{}), "cancelled");
  BOOST_CHECK_EQUAL(page(db::param{}, std::to_string(second.id)), "cancelled");
  BOOST_CHECK_EQUAL(page(db::param{}, std::to_string(first.id)), "");
}

// A page of one type is read through that type's tasks of each status
// (storage/sql/task_reads.sql): following its tokens gives each of the
// type's tasks once and newest first, for every status filter, in one page
// of 1,000 where a scan of 100 tasks a page takes many; and the same when
// more of them wait than a page sorts by id (1,000), by the bounded scan
// for the statuses that may be waiting.
BOOST_AUTO_TEST_CASE(a_types_pages_give_each_of_its_tasks_once_newest_first) {
  test::task_database db{"typepages"};
  db.insert_tasks(1400, "CASE WHEN g % 3 = 0 THEN 'O' ELSE 'T' END", "now()");
  db.exec(every_status_by_id("true"));
  auto check_every_status = [&](int limit, bool waiting_scanned) {
    std::vector<db::param> statuses{db::param{}};
    for (const char* s :
         {"pending", "failed", "running", "succeeded", "dead", "cancelled", "stopped"})
      statuses.emplace_back(std::string{s});
    for (const auto& status : statuses) {
      auto expected = db.scalar(
          "SELECT coalesce(string_agg(id::text, ',' ORDER BY id DESC), '') FROM taskmill.tasks "
          "WHERE type = 'T' AND ($1::taskmill.task_status IS NULL OR status = $1)",
          {status});
      BOOST_TEST_CONTEXT("status " << (status ? *status : std::string{"any"}) << ", pages of "
                                   << limit) {
        BOOST_CHECK(!expected.empty());
        auto listed = list_ids(db, std::string{"T"}, status, limit, 100);
        BOOST_CHECK_EQUAL(listed.ids, expected);
        bool scanned = waiting_scanned && (!status || *status == "pending" || *status == "failed");
        if (limit == 1000) BOOST_CHECK_EQUAL(listed.pages == 1, !scanned);
      }
    }
    auto none = list_ids(db, std::string{"NONE"}, db::param{}, limit, 100);
    BOOST_CHECK_EQUAL(none.ids, "");
    BOOST_CHECK_EQUAL(none.pages, 1);
  };
  check_every_status(3, false);
  check_every_status(1000, false);
  db.exec(
      "INSERT INTO taskmill.tasks (type, key, execute_at, trace_id, priority, max_retries, "
      "timeout_ms, backoff_kind, backoff_base_ms, backoff_cap_ms, backoff_jitter) SELECT 'T', "
      "'waiting-' || g, now(), 't', 3, 2, 5000, 'fixed', 1, 1000, 0 "
      "FROM generate_series(1, 1100) g");
  check_every_status(1000, true);
}

// A task's attempts: none yet is one row without an attempt; the finished
// ones in order, then the one under way; no task, no row.
BOOST_AUTO_TEST_CASE(a_tasks_attempts_are_its_finished_ones_and_the_one_under_way) {
  test::task_database db{"attemptreads"};
  auto task = db.call("submit('T', 'a', max_retries => 1)");
  auto id = std::to_string(task.id);
  auto attempts = [&](const std::string& of) {
    return rows_of(db, db::sql::task_attempts,
                   "coalesce(attempt::text, '-') || ':' || coalesce(outcome, '-')", {of});
  };
  BOOST_CHECK_EQUAL(attempts(id), "-:-");
  auto claimed = db.claim(1);
  BOOST_REQUIRE_EQUAL(claimed.size(), 1u);
  BOOST_CHECK_EQUAL(attempts(id), "-:-,1:running");
  BOOST_REQUIRE(db.complete(claimed[0].id, claimed[0].attempt, "retry", "boom"));
  BOOST_REQUIRE_EQUAL(db.by_id(task.id).status, "failed");
  db.exec("UPDATE taskmill.tasks SET execute_at = now() - interval '1 hour' WHERE id = $1", {id});
  BOOST_REQUIRE_EQUAL(db.claim(1).size(), 1u);
  BOOST_CHECK_EQUAL(attempts(id), "1:retry,2:running");
  BOOST_CHECK_EQUAL(attempts("0"), "");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(server)

// The embedded PostgreSQL (the demo's, the tests' and the bench's) holds a
// few batches of the largest size at once in its lock table, read as a node
// reads it at start.
BOOST_AUTO_TEST_CASE(the_embedded_servers_lock_table_holds_a_few_largest_batches) {
  test::task_database db{"locktable"};
  auto conn = db.connect_direct();
  auto shortfall = db::lock_table_shortfall(conn);
  BOOST_REQUIRE(shortfall);
  BOOST_CHECK_MESSAGE(!*shortfall, shortfall->value_or(""));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(pipeline)

// Each pipelined statement commits at its Sync, after its rows have come: a
// commit that fails must make the statement an error, never a result the
// caller acts on (a claim dispatched although its commit never happened
// would run the same attempt twice once the tasks are claimed again).
BOOST_AUTO_TEST_CASE(a_statement_whose_commit_fails_is_an_error_not_a_result) {
  test::scratch_database db{"pipelinecommit"};
  db.exec(
      "CREATE TABLE parent (id int PRIMARY KEY); "
      "CREATE TABLE child (parent int REFERENCES parent DEFERRABLE INITIALLY DEFERRED)");
  static const db::statement orphan{"insert_orphan",
                                    "INSERT INTO child VALUES (42) RETURNING parent"};
  static const db::statement parent{"insert_parent",
                                    "INSERT INTO parent VALUES ($1::int) RETURNING id"};
  auto conn = db::connection::open(db.conninfo(), 10s, 10s);
  BOOST_REQUIRE_MESSAGE(conn, test::describe(conn));
  BOOST_REQUIRE(!conn->prepare_and_enter_pipeline({&orphan, &parent}));
  std::vector<caf::expected<db::result>> out;
  conn->run({{&parent, {"1"}}, {&orphan, {}}, {&parent, {"2"}}},
            [&out](caf::expected<db::result>&& res) { out.push_back(std::move(res)); });
  BOOST_REQUIRE_EQUAL(out.size(), 3u);
  BOOST_CHECK(out[0]);
  BOOST_CHECK_MESSAGE(!out[1], "the orphan's commit failed, yet it came back as a result");
  if (!out[1])
    BOOST_CHECK_MESSAGE(error_message(out[1].error()).find("foreign key") != std::string::npos,
                        error_message(out[1].error()));
  BOOST_CHECK(out[2]);
  BOOST_CHECK(!conn->broken());
  BOOST_CHECK_EQUAL(db.scalar("SELECT count(*) FROM child"), "0");
  BOOST_CHECK_EQUAL(db.scalar("SELECT count(*) FROM parent"), "2");
}

// PgBouncer before 1.21 hands a server connection whose client left with
// pipelined statements still running to the next client that links to it,
// which then reads the leaver's results first. A pooled connection must
// never take them as its own, whichever way it asks (a text, a statement
// with parameters, a pipelined round): it drops itself, and a new one
// works. Run behind the test's PgBouncer by `storage.pooled`.
BOOST_AUTO_TEST_CASE(a_pooled_session_never_reads_results_another_left_behind,
                     *boost::unit_test::disabled()) {
  BOOST_REQUIRE_MESSAGE(test::behind_pooler(), "run through ctest as storage.pooled");
  test::scratch_database db{"strays"};
  static const db::statement mine{"mine", "SELECT 'mine:' || $1::text"};
  auto leave_with_a_statement_running = [&] {
    // The leaver reads its first answer, so its server looks idle to the
    // pooler, and leaves while its second statement runs.
    std::unique_ptr<PGconn, void (*)(PGconn*)> leaver{PQconnectdb(db.conninfo().c_str()), PQfinish};
    BOOST_REQUIRE_EQUAL(PQstatus(leaver.get()), CONNECTION_OK);
    BOOST_REQUIRE(PQenterPipelineMode(leaver.get()));
    for (auto sql : {"SELECT 'first'", "SELECT 'left behind' FROM pg_sleep(0.3)"})
      BOOST_REQUIRE(
          PQsendQueryParams(leaver.get(), sql, 0, nullptr, nullptr, nullptr, nullptr, 0) &&
          PQpipelineSync(leaver.get()));
    BOOST_REQUIRE(PQflush(leaver.get()) == 0);
    for (int expected : {int{PGRES_TUPLES_OK}, -1, int{PGRES_PIPELINE_SYNC}}) {
      PGresult* res = PQgetResult(leaver.get());
      BOOST_REQUIRE_EQUAL(res ? static_cast<int>(PQresultStatus(res)) : -1, expected);
      PQclear(res);
    }
  };
  int wrong = 0;
  int refused = 0;
  auto stray = [&](const caf::error& err) {
    auto text = error_message(err);
    BOOST_CHECK_MESSAGE(text.find("another session's results") != std::string::npos, text);
    ++refused;
  };
  // Asks in one of three ways; false when the connection dropped itself.
  auto ask = [&](db::connection& conn, int way, int round) {
    auto expected = "mine:" + std::to_string(round);
    if (way < 2) {
      auto got = way == 0 ? conn.exec("SELECT '" + expected + "'")
                          : conn.exec("SELECT 'mine:' || $1::text", {std::to_string(round)});
      if (!got) {
        stray(got.error());
        BOOST_CHECK(conn.broken());
        return false;
      }
      if (got->string(0, 0) != expected) ++wrong;
      return true;
    }
    int answered = 0;
    bool dropped = false;
    conn.run({{&mine, {std::to_string(round)}}, {&mine, {std::to_string(round)}}},
             [&](caf::expected<db::result>&& res) {
               if (!res) {
                 if (!std::exchange(dropped, true)) stray(res.error());
                 return;
               }
               ++answered;
               if (res->string(0, 0) != expected) ++wrong;
             });
    BOOST_CHECK(dropped ? conn.broken() : answered == 2);
    return !dropped;
  };
  auto connect = [&](int way) {
    for (int attempt = 0;; ++attempt) {
      // Opening asks too, and may be the one to find another's results.
      auto conn = db::connection::open(db.conninfo(), 10s, 10s, true);
      if (!conn && attempt < 5) {
        stray(conn.error());
        continue;
      }
      BOOST_REQUIRE_MESSAGE(conn, test::describe(conn));
      if (way == 2) BOOST_REQUIRE(!conn->prepare_and_enter_pipeline({&mine}));
      return std::move(*conn);
    }
  };
  for (int round = 0; round < 15; ++round) {
    int way = round % 3;
    // Connected before the leaver: the next to link to a server after it
    // left (the pooler hands out the last one released first).
    auto conn = connect(way);
    leave_with_a_statement_running();
    bool answered = ask(conn, way, round);
    // A session that dropped itself may leave its own statements behind in
    // turn; at once, without waiting, a new one gets through in a few tries.
    for (int attempt = 0; !answered && attempt < 5; ++attempt) {
      auto again = connect(way);
      answered = ask(again, way, round);
    }
    BOOST_CHECK_MESSAGE(answered, "round " << round << ": no session got through");
    std::this_thread::sleep_for(350ms);
  }
  BOOST_TEST_MESSAGE(refused << " sessions found another's results and dropped themselves");
  BOOST_CHECK_EQUAL(wrong, 0);
  BOOST_CHECK_GE(refused, 3);
}

// Integer arrays go without quotes; PostgreSQL reads back what was meant,
// the extremes and an empty array included.
BOOST_AUTO_TEST_CASE(integer_arrays_reach_postgresql_as_they_were) {
  test::scratch_database db{"numberarrays"};
  auto conn = db::connection::open(db.conninfo(), 10s, 10s);
  BOOST_REQUIRE_MESSAGE(conn, test::describe(conn));
  std::vector<int64_t> values{1, -2, 0, std::numeric_limits<int64_t>::max(),
                              std::numeric_limits<int64_t>::min()};
  auto literal = db::number_array_literal(values, [](int64_t v) { return v; });
  auto back =
      conn->exec("SELECT array_to_string($1::bigint[], ' '), cardinality($1::bigint[])", {literal});
  BOOST_REQUIRE_MESSAGE(back, test::describe(back));
  BOOST_CHECK_EQUAL(back->string(0, 0), "1 -2 0 9223372036854775807 -9223372036854775808");
  auto empty = conn->exec("SELECT cardinality($1::int[])",
                          {db::number_array_literal(std::vector<int>{}, [](int v) { return v; })});
  BOOST_REQUIRE_MESSAGE(empty, test::describe(empty));
  BOOST_CHECK_EQUAL(empty->string(0, 0), "0");
}

// A claim is answered as soon as its statement is through, not after the
// statements queued behind it (the next-due read): here the second statement
// waits for a lock that is given up only once the first one was handed over.
BOOST_AUTO_TEST_CASE(each_statement_is_handed_over_before_the_next_one_ran) {
  test::scratch_database db{"pipelineeach"};
  static const db::statement first{"first", "SELECT 1"};
  static const db::statement wait_for_lock{"wait_for_lock",
                                           "SELECT pg_advisory_xact_lock(4242)::text"};
  auto holder = db::connection::open(db.conninfo(), 10s, 10s);
  BOOST_REQUIRE_MESSAGE(holder, test::describe(holder));
  BOOST_REQUIRE(holder->exec("SELECT pg_advisory_lock(4242)"));
  auto conn = db::connection::open(db.conninfo(), 10s, 2s);
  BOOST_REQUIRE_MESSAGE(conn, test::describe(conn));
  BOOST_REQUIRE(!conn->prepare_and_enter_pipeline({&first, &wait_for_lock}));
  std::vector<caf::expected<db::result>> handed;
  conn->run({{&first, {}}, {&wait_for_lock, {}}}, [&](caf::expected<db::result>&& res) {
    handed.push_back(std::move(res));
    if (handed.size() == 1) BOOST_CHECK(holder->exec("SELECT pg_advisory_unlock(4242)"));
  });
  BOOST_REQUIRE_EQUAL(handed.size(), 2u);
  BOOST_CHECK(handed[0]);
  BOOST_CHECK_MESSAGE(handed[1], "the first statement was handed over only after the second ran: "
                                     << (handed[1] ? "" : error_message(handed[1].error())));
}

// A statement handed over stays handed over when the connection is lost
// while a later one runs: the later one, and only it, is an error.
BOOST_AUTO_TEST_CASE(a_connection_lost_midway_fails_only_the_statements_not_yet_handed_over) {
  test::scratch_database db{"pipelinelost"};
  static const db::statement first{"first", "SELECT pg_backend_pid()::text"};
  static const db::statement slow{"slow", "SELECT pg_sleep(5)::text"};
  auto killer = db::connection::open(db.conninfo(), 10s, 10s);
  BOOST_REQUIRE_MESSAGE(killer, test::describe(killer));
  auto conn = db::connection::open(db.conninfo(), 10s, 10s);
  BOOST_REQUIRE_MESSAGE(conn, test::describe(conn));
  BOOST_REQUIRE(!conn->prepare_and_enter_pipeline({&first, &slow}));
  std::vector<caf::expected<db::result>> handed;
  conn->run({{&first, {}}, {&slow, {}}}, [&](caf::expected<db::result>&& res) {
    if (handed.empty() && res)
      BOOST_CHECK(killer->exec("SELECT pg_terminate_backend(" + res->string(0, 0) + ")"));
    handed.push_back(std::move(res));
  });
  BOOST_REQUIRE_EQUAL(handed.size(), 2u);
  BOOST_CHECK(handed[0]);
  BOOST_CHECK(!handed[1]);
  BOOST_CHECK(conn->broken());
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_FIXTURE_TEST_SUITE(storage_actor_tests, test::actor_system_fixture)

// The claim says how far into its turns it went, levels without due work
// included, so that the pusher can tell a level that ran dry from one the
// room did not reach.
BOOST_AUTO_TEST_CASE(a_claim_tells_how_far_into_its_turns_it_went) {
  test::scratch_database database{"turns"};
  auto storage = start_storage(*sys, database.conninfo());
  database.exec(
      "SELECT taskmill.submit('T', 'urgent-' || k, priority => 1), "
      "taskmill.submit('T', 'normal-' || k, priority => 3) FROM generate_series(1, 5) k");
  auto claim = [&](std::vector<int> turns, int permits) {
    pb::ClaimRequest req;
    req.set_node("test-node");
    req.mutable_grant()->set_permits(permits);
    req.mutable_grant()->set_any_type(true);
    for (auto level : turns) req.add_turns(level);
    auto claimed = test::ask<pb::ClaimedTasks>(*sys, storage, claim_atom_v, req);
    BOOST_REQUIRE_MESSAGE(claimed, test::describe(claimed));
    return *claimed;
  };
  // Level 5 has nothing due: its turn is passed over, and counts as gone through.
  auto first = claim({5, 3, 1, 3, 1}, 2);
  BOOST_REQUIRE_EQUAL(first.tasks_size(), 2);
  BOOST_CHECK_EQUAL(first.turns_taken(), 3);
  std::multiset<int> levels;
  for (const auto& task : first.tasks()) levels.insert(task.priority());
  BOOST_CHECK((levels == std::multiset<int>{1, 3}));
  // Room for every turn: all of them gone through, the rest filled in claim order.
  auto second = claim({3, 1}, 8);
  BOOST_CHECK_EQUAL(second.tasks_size(), 8);
  BOOST_CHECK_EQUAL(second.turns_taken(), 2);
  // Nothing claimed: nothing to tell.
  auto third = claim({1, 3}, 4);
  BOOST_CHECK_EQUAL(third.tasks_size(), 0);
  BOOST_CHECK(!third.has_turns_taken());
}

// The claim's tasks carry when they started by the database's clock (the
// pickup latency); the time until the next task comes due is asked apart.
BOOST_AUTO_TEST_CASE(a_claim_dates_its_tasks_and_the_next_due_time_is_asked_apart) {
  test::scratch_database database{"nextdue"};
  auto storage = start_storage(*sys, database.conninfo());
  pb::ClaimRequest req;
  req.set_node("test-node");
  req.mutable_grant()->set_permits(10);
  req.mutable_grant()->set_any_type(true);
  req.add_turns(3);
  auto next_due = [&] {
    auto next = test::ask<pb::NextDue>(*sys, storage, next_due_atom_v, req);
    BOOST_REQUIRE_MESSAGE(next, test::describe(next));
    BOOST_CHECK(!next->due_now());
    return next->next_due_in_ms();
  };
  BOOST_CHECK_EQUAL(next_due(), -1);
  database.exec(
      "SELECT taskmill.submit('T', 'now'), "
      "taskmill.submit('T', 'later', execute_at => now() + interval '800 ms')");
  auto claimed = test::ask<pb::ClaimedTasks>(*sys, storage, claim_atom_v, req);
  BOOST_REQUIRE_MESSAGE(claimed, test::describe(claimed));
  BOOST_REQUIRE_EQUAL(claimed->tasks_size(), 1);
  const auto& task = claimed->tasks(0);
  auto stored_us = std::stoll(database.scalar(
      "SELECT (extract(epoch FROM started_at) * 1000000)::bigint FROM taskmill.tasks "
      "WHERE key = 'now'"));
  BOOST_CHECK_EQUAL(task.started_at().seconds() * 1000000 + task.started_at().nanos() / 1000,
                    stored_us);
  auto ms = next_due();
  // Within the horizon (a second by default).
  BOOST_CHECK_GT(ms, 0);
  BOOST_CHECK_LE(ms, 800);
}

// After a claim whose answer was lost: what runs on a node (its executions
// only), and of those, the tasks, whole, that still run under that attempt.
BOOST_AUTO_TEST_CASE(the_executions_running_on_a_node_and_those_still_running_are_read) {
  test::scratch_database database{"inflight"};
  auto storage = start_storage(*sys, database.conninfo());
  database.exec(
      "SELECT taskmill.submit('T', 'k' || k, payload => ('{\"n\": ' || k || '}')::jsonb) "
      "FROM generate_series(1, 4) k");
  database.exec(
      "UPDATE taskmill.tasks SET status = 'running', attempt = 1, picked_by = CASE WHEN key = "
      "'k4' THEN 'other' ELSE 'here' END, started_at = now() WHERE key <> 'k3'");
  auto running = test::ask<pb::Executions>(*sys, storage, running_atom_v, std::string{"here"});
  BOOST_REQUIRE_MESSAGE(running, test::describe(running));
  BOOST_REQUIRE_EQUAL(running->task_ids_size(), 2);
  // One of them ends meanwhile; another is asked under an attempt it no longer runs.
  database.exec(
      "UPDATE taskmill.tasks SET status = 'succeeded', finished_at = now() WHERE key = 'k2'");
  auto asked = *running;
  auto k4 = std::stoll(database.scalar("SELECT id FROM taskmill.tasks WHERE key = 'k4'"));
  asked.add_task_ids(k4);
  asked.add_attempts(2);
  auto still = test::ask<pb::TaskList>(*sys, storage, running_atom_v, asked);
  BOOST_REQUIRE_MESSAGE(still, test::describe(still));
  BOOST_REQUIRE_EQUAL(still->tasks_size(), 1);
  BOOST_CHECK_EQUAL(still->tasks(0).key(), "k1");
  BOOST_CHECK_EQUAL(still->tasks(0).attempt(), 1);
  BOOST_CHECK_EQUAL(still->tasks(0).payload(), R"({"n": 1})");
  // What is left of its timeout; none left, it is not read.
  BOOST_CHECK_GT(still->tasks(0).timeout_ms(), 0);
  BOOST_CHECK_LE(still->tasks(0).timeout_ms(), 5000);
  database.exec(
      "UPDATE taskmill.tasks SET started_at = now() - timeout_ms * interval '1 ms' WHERE key = "
      "'k1'");
  auto timed_out = test::ask<pb::TaskList>(*sys, storage, running_atom_v, asked);
  BOOST_REQUIRE_MESSAGE(timed_out, test::describe(timed_out));
  BOOST_CHECK_EQUAL(timed_out->tasks_size(), 0);
}

// The hand-off view (storage/sql/offers.sql): an offer made and topped up,
// submits handed to it, and a claim that takes it back counts what they
// took and claims as many tasks fewer.
BOOST_AUTO_TEST_CASE(an_offer_is_made_topped_up_and_taken_back_by_a_claim) {
  test::scratch_database database{"offers"};
  auto storage = start_storage(*sys, database.conninfo());
  database.exec("SELECT taskmill.register_node('here', 'i1', '', 60000, NULL)");
  pb::ClaimRequest offer;
  offer.set_node("here");
  offer.set_offer_generation(7);
  offer.set_offer_fresh_ms(600000);
  offer.mutable_grant()->set_permits(2);
  offer.mutable_grant()->set_any_type(true);
  auto made = test::ask<bool>(*sys, storage, make_offer_atom_v, offer);
  BOOST_REQUIRE_MESSAGE(made, test::describe(made));
  BOOST_CHECK(*made);
  auto topped = [&](int64_t generation) {
    auto added =
        test::ask<bool>(*sys, storage, top_up_atom_v, std::string{"here"}, generation, int32_t{1});
    BOOST_REQUIRE_MESSAGE(added, test::describe(added));
    return *added;
  };
  BOOST_CHECK(topped(7));
  BOOST_CHECK(!topped(8));
  for (int k = 1; k <= 6; ++k)
    database.exec("SELECT taskmill.submit('T', 'k" + std::to_string(k) + "')");
  BOOST_CHECK_EQUAL(database.scalar("SELECT count(*) FROM taskmill.tasks WHERE status = 'running' "
                                    "AND picked_by = 'here'"),
                    "3");
  pb::ClaimRequest req;
  req.set_node("here");
  req.mutable_grant()->set_permits(5);
  req.mutable_grant()->set_any_type(true);
  for (int i = 0; i < 5; ++i) req.add_turns(3);
  req.set_offered(3);
  req.set_offer_generation(7);
  auto claimed = test::ask<pb::ClaimedTasks>(*sys, storage, claim_atom_v, req);
  BOOST_REQUIRE_MESSAGE(claimed, test::describe(claimed));
  BOOST_CHECK_EQUAL(claimed->handed_unheard(), 3);
  BOOST_CHECK_EQUAL(claimed->tasks_size(), 2);
  BOOST_CHECK_EQUAL(database.scalar("SELECT count(*) FROM taskmill.offer_slots"), "0");
  // Taken back again, with no offer standing: all it held may have been
  // taken, their hand-offs on their way still.
  auto taken = test::ask<int32_t>(*sys, storage, take_back_atom_v, std::string{"here"}, int32_t{4});
  BOOST_REQUIRE_MESSAGE(taken, test::describe(taken));
  BOOST_CHECK_EQUAL(*taken, 4);
  // A claim that took no task still tells what submits took.
  BOOST_REQUIRE(*test::ask<bool>(*sys, storage, make_offer_atom_v, [&] {
    offer.set_offer_generation(9);
    return offer;
  }()));
  database.exec(
      "UPDATE taskmill.tasks SET execute_at = now() + interval '1 hour' WHERE status = 'pending'");
  database.exec("SELECT taskmill.submit('T', 'k7')");
  req.set_offered(2);
  req.set_offer_generation(9);
  req.mutable_grant()->set_permits(2);
  claimed = test::ask<pb::ClaimedTasks>(*sys, storage, claim_atom_v, req);
  BOOST_REQUIRE_MESSAGE(claimed, test::describe(claimed));
  BOOST_CHECK_EQUAL(claimed->tasks_size(), 0);
  BOOST_CHECK_EQUAL(claimed->handed_unheard(), 1);
}

BOOST_AUTO_TEST_CASE(concurrent_requests_share_round_trips_and_reach_their_callers) {
  test::scratch_database database{"batch"};
  auto storage = start_storage(*sys, database.conninfo());
  BOOST_REQUIRE(test::eventually([&] { return status_of(*sys, storage).connected(); }));
  constexpr int n = 300;
  database.exec("SELECT taskmill.submit('T', k::text) FROM generate_series(1, " +
                std::to_string(n) + ") k");
  auto ids = database.exec("SELECT id, key FROM taskmill.tasks ORDER BY id");
  BOOST_REQUIRE_EQUAL(ids.rows(), n);
  auto before = status_of(*sys, storage);

  std::latch done{n};
  std::mutex mtx;
  std::vector<std::string> problems;
  sys->spawn([&](caf::event_based_actor* self) {
    for (int i = 0; i < n; ++i) {
      auto id = ids.int64(i, 0);
      auto key = ids.string(i, 1);
      self->request(storage, 30s, caf::get_atom_v, id)
          .then(
              [&, id, key](const pb::Task& task) {
                if (task.id() != id || task.key() != key) {
                  std::lock_guard<std::mutex> guard{mtx};
                  problems.push_back("asked for " + std::to_string(id) + ", got " +
                                     std::to_string(task.id()));
                }
                done.count_down();
              },
              [&](const caf::error& err) {
                std::lock_guard<std::mutex> guard{mtx};
                problems.push_back(error_message(err));
                done.count_down();
              });
    }
  });
  done.wait();
  BOOST_CHECK_MESSAGE(problems.empty(), problems.size() << " wrong answers, first: "
                                                        << (problems.empty() ? "" : problems[0]));
  auto after = status_of(*sys, storage);
  auto round_trips = after.round_trips() - before.round_trips();
  BOOST_TEST_MESSAGE(n << " concurrent requests took " << round_trips << " round trips");
  BOOST_CHECK_LE(round_trips, n / 10);
  BOOST_CHECK_EQUAL(after.requests() - before.requests(), n);
  caf::anon_send_exit(storage, caf::exit_reason::user_shutdown);
}

BOOST_AUTO_TEST_CASE(concurrent_submits_merge_into_few_statements) {
  test::scratch_database database{"merge"};
  auto storage = start_storage(*sys, database.conninfo());
  BOOST_REQUIRE(test::eventually([&] { return status_of(*sys, storage).connected(); }));
  auto before = status_of(*sys, storage);
  constexpr int n = 200;
  std::latch done{n};
  std::mutex mtx;
  std::vector<std::string> problems;
  int rejected = 0;
  sys->spawn([&](caf::event_based_actor* self) {
    for (int i = 0; i < n; ++i) {
      // Each request carries i % 3 + 1 tasks; request 57 is invalid.
      pb::SubmitTasks req;
      std::vector<std::string> keys;
      for (int j = 0; j <= i % 3; ++j) {
        auto t = req.add_tasks();
        t->set_type("MERGE");
        t->set_key("k" + std::to_string(i) + "-" + std::to_string(j));
        if (i == 57) t->set_priority(9);
        keys.push_back(t->key());
      }
      self->request(storage, 30s, submit_atom_v, std::move(req))
          .then(
              [&, keys, i](const pb::SubmitResults& res) {
                std::lock_guard<std::mutex> guard{mtx};
                if (i == 57) problems.push_back("the invalid submit was accepted");
                if (res.results_size() != static_cast<int>(keys.size()))
                  problems.push_back("wrong number of results");
                for (int j = 0; j < res.results_size() && j < static_cast<int>(keys.size()); ++j)
                  if (res.results(j).task().key() != keys[j] ||
                      res.results(j).outcome() != pb::CREATED)
                    problems.push_back("request " + std::to_string(i) + " got " +
                                       res.results(j).task().key());
                done.count_down();
              },
              [&, i](const caf::error& err) {
                std::lock_guard<std::mutex> guard{mtx};
                if (i != 57)
                  problems.push_back(error_message(err));
                else if (is(err, errc::invalid_argument) &&
                         error_message(err).find("priority") != std::string::npos)
                  ++rejected;
                else
                  problems.push_back("invalid submit failed oddly: " + error_message(err));
                done.count_down();
              });
    }
  });
  done.wait();
  BOOST_CHECK_MESSAGE(problems.empty(), problems.size() << " problems, first: "
                                                        << (problems.empty() ? "" : problems[0]));
  BOOST_CHECK_EQUAL(rejected, 1);
  auto after = status_of(*sys, storage);
  BOOST_TEST_MESSAGE(n << " concurrent submits took " << after.statements() - before.statements()
                       << " statements in " << after.round_trips() - before.round_trips()
                       << " round trips");
  BOOST_CHECK_LE(after.statements() - before.statements(), n / 5);
  // Every valid task is stored once; the invalid request stored nothing.
  int valid_tasks = 0;
  for (int i = 0; i < n; ++i) valid_tasks += i == 57 ? 0 : i % 3 + 1;
  BOOST_CHECK_EQUAL(database.scalar("SELECT count(*) FROM taskmill.tasks"),
                    std::to_string(valid_tasks));
  caf::anon_send_exit(storage, caf::exit_reason::user_shutdown);
}

BOOST_AUTO_TEST_CASE(reconnects_after_the_server_restarts) {
  auto dir =
      std::filesystem::temp_directory_path() / ("taskmill-restart-" + std::to_string(getpid()));
  db::embedded_postgres_options opts;
  opts.dir = dir.string();
  opts.throwaway = true;
  auto pg = db::embedded_postgres::start(opts);
  BOOST_REQUIRE_MESSAGE(pg, test::describe(pg));
  auto storage = start_storage(*sys, pg->conninfo());
  BOOST_REQUIRE(test::eventually([&] { return status_of(*sys, storage).connected(); }));
  auto created = test::ask<pb::SubmitResults>(*sys, storage, submit_atom_v, one_task("R", "1"));
  BOOST_REQUIRE(created);
  auto id = created->results(0).task().id();

  opts.port = pg->port();
  BOOST_REQUIRE(!pg->stop());
  auto during = test::ask<pb::Task>(*sys, storage, caf::get_atom_v, id);
  BOOST_REQUIRE(!during);
  BOOST_CHECK_MESSAGE(is(during.error(), errc::storage_unavailable), error_message(during.error()));
  BOOST_CHECK_NE(error_message(during.error()).find("PostgreSQL"), std::string::npos);
  BOOST_CHECK(!status_of(*sys, storage).connected());

  auto again = db::embedded_postgres::start(opts);
  BOOST_REQUIRE_MESSAGE(again, test::describe(again));
  BOOST_REQUIRE(test::eventually([&] { return status_of(*sys, storage).connected(); }, 20s));
  auto after = test::ask<pb::Task>(*sys, storage, caf::get_atom_v, id);
  BOOST_REQUIRE_MESSAGE(after, test::describe(after));
  BOOST_CHECK_EQUAL(after->key(), "1");
  BOOST_CHECK_GE(status_of(*sys, storage).reconnects(), 1);
  caf::anon_send_exit(storage, caf::exit_reason::user_shutdown);
  BOOST_CHECK(!again->stop());
  std::filesystem::remove_all(again->dir());
}

BOOST_AUTO_TEST_SUITE_END()
