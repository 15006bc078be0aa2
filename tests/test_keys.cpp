// Concurrency keys (SPEC §4 Keyed limits) on a scratch database: a type's
// key settings and their refusals, each task's key and class as submitted,
// and claims that serve keys in turns, never past a key's limit or rate,
// even with claimers racing.

#define BOOST_TEST_MODULE keys
#include <boost/test/unit_test.hpp>

#include "tests/support/claim_races.hpp"
#include "tests/support/task_sql.hpp"

#include <barrier>
#include <map>
#include <string>
#include <thread>

using namespace taskmill;
using test::task_database;
using namespace taskmill::test::races;

namespace {

/// Writes type `type` keyed in the space given as JSON (`space`, a
/// taskmill.put_key_spaces object), its key taken from `path` or up to
/// `separator` (SQL literals or NULL). Answers the error, or empty.
std::string put_keyed(const task_database& db, const std::string& type, const std::string& space,
                      const std::string& space_name, const std::string& path,
                      const std::string& separator, const std::string& rate_units = "NULL") {
  auto conn = db.connect();
  auto res = conn.exec(
      "SELECT taskmill.put_type_settings(ARRAY['" + type +
      "'], '{5000}', '{2}', '{fixed}', '{1}', '{1000}', '{0}', '{NULL}', '{NULL}', NULL, NULL, "
      "NULL, '[" +
      space + "]', ARRAY[" + space_name + "], ARRAY[" + path + "]::text[], ARRAY[" + separator +
      "]::text[], ARRAY[" + rate_units + "]::int[])");
  return res ? std::string{} : test::describe(res);
}

/// Claims up to `n` due tasks at level 3 as node `node`; answers the
/// concurrency key of each.
std::vector<std::string> claim_keys(db::connection& conn, int n, const std::string& node = "n1") {
  auto res = conn.exec(
      "SELECT t.concurrency_key FROM taskmill.claim_by_turns('" + node + "', " + std::to_string(n) +
      ", '{3}', '{}', '{}', 0, NULL, NULL, NULL) c JOIN taskmill.tasks t ON t.id = c.id");
  BOOST_REQUIRE_MESSAGE(res, test::describe(res));
  std::vector<std::string> keys;
  for (int i = 0; i < res->rows(); ++i) keys.push_back(res->string(i, 0));
  return keys;
}

std::map<std::string, int> counts(const std::vector<std::string>& keys) {
  std::map<std::string, int> out;
  for (const auto& k : keys) ++out[k];
  return out;
}

/// `n` due tasks of type `type` whose payload's tenant is `tenant` (and tier
/// `tier`, if any), through taskmill.submit_batch.
void submit_tenant_tasks(const task_database& db, const std::string& type,
                         const std::string& tenant, int n, const std::string& tier = "") {
  auto payload = "jsonb_build_object('tenant', '" + tenant + "'" +
                 (tier.empty() ? "" : ", 'tier', '" + tier + "'") + ")";
  db.exec(
      "SELECT count(*) FROM (SELECT array_agg('" + type + "'::text) AS types, array_agg('" +
      tenant + "-' || g) AS keys, array_agg(" + payload + ") AS payloads FROM generate_series(1, " +
      std::to_string(n) +
      ") g) b, taskmill.submit_batch(b.types, b.keys, NULL, b.payloads, NULL, NULL, NULL, NULL, "
      "NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL) s");
}

const std::string tenants = R"({"name": "tenants", "limit": 2})";

/// Five claimers of random turns race until nothing is left, each pausing
/// up to 2 ms before it ends what it claimed, a third retried.
void race_five_claimers(const task_database& db, race_record& record, std::atomic<int>& stale) {
  race_claimers(
      db, 5, 1, record,
      [&](int w, std::mt19937& rng) { return claim_by_random_turns(w, rng, 40, "'{}', '{}', 0"); },
      [&](db::connection& conn, std::mt19937& rng, const std::vector<int64_t>& ids,
          const std::vector<int64_t>& attempts) {
        std::this_thread::sleep_for(std::chrono::microseconds{rng() % 2000});
        finish_a_third_retried(record, stale)(conn, rng, ids, attempts);
      });
}

}  // namespace

BOOST_AUTO_TEST_SUITE(key_settings)

BOOST_AUTO_TEST_CASE(bad_key_settings_are_refused_naming_the_field) {
  task_database db{"keybad"};
  auto refused = [&](const std::string& space, const std::string& name, const std::string& path,
                     const std::string& separator, const std::string& naming) {
    auto error = put_keyed(db, "T", space, name, path, separator);
    BOOST_CHECK_MESSAGE(error.find(naming) != std::string::npos,
                        "expected \"" << naming << "\" in: " << error);
  };
  refused(R"({"name": "s", "limit": 0})", "'s'", "'$.t'", "NULL", "key_spaces.s.limit");
  refused(R"({"name": "s", "limit": 1.5})", "'s'", "'$.t'", "NULL", "key_spaces.s.limit");
  refused(R"({"name": "s", "limit": 2, "keys": {"a": -1}})", "'s'", "'$.t'", "NULL",
          "key_spaces.s.keys.a");
  refused(R"({"name": "s", "limit": 2, "classes": {"free": 1}})", "'s'", "'$.t'", "NULL",
          "key_spaces.s.classes needs a class_path");
  refused(R"({"name": "s", "limit": 2, "class_path": "$$ nope"})", "'s'", "'$.t'", "NULL",
          "key_spaces.s.class_path");
  refused(tenants, "'elsewhere'", "'$.t'", "NULL", "types.T.key_space: no key space");
  refused(tenants, "'tenants'", "'$.t'", "':'", "key_path and key_separator are two ways");
  refused(tenants, "'tenants'", "'$[[['", "NULL", "types.T.key_path");
  refused(tenants, "NULL", "'$.t'", "NULL", "go with key_space");
  // Nothing of a refused call was stored.
  BOOST_CHECK_EQUAL(db.scalar("SELECT count(*) FROM taskmill.key_spaces"), "0");
  BOOST_CHECK_EQUAL(db.scalar("SELECT count(*) FROM taskmill.task_types WHERE type = 'T'"), "0");
  BOOST_CHECK_EQUAL(put_keyed(db, "T", tenants, "'tenants'", "'$.tenant'", "NULL"), "");
  BOOST_CHECK_EQUAL(db.scalar("SELECT key_space || ' ' || key_path FROM taskmill.task_types "
                              "WHERE type = 'T'"),
                    "tenants $.tenant");
}

BOOST_AUTO_TEST_CASE(bad_rates_are_refused_naming_the_field) {
  task_database db{"keybadrate"};
  auto refused = [&](const std::string& space, const std::string& units,
                     const std::string& naming) {
    auto error = put_keyed(db, "T", space, "'s'", "'$.t'", "NULL", units);
    BOOST_CHECK_MESSAGE(error.find(naming) != std::string::npos,
                        "expected \"" << naming << "\" in: " << error);
  };
  refused(R"({"name": "s", "limit": 5, "rate": 0, "period_ms": 1000})", "NULL",
          "key_spaces.s.rate must be");
  refused(R"({"name": "s", "limit": 5, "rate": 10001, "period_ms": 1000})", "NULL",
          "key_spaces.s.rate must be");
  refused(R"({"name": "s", "limit": 5, "rate": 2.5, "period_ms": 1000})", "NULL",
          "key_spaces.s.rate must be");
  refused(R"({"name": "s", "limit": 5, "rate": 5})", "NULL", "key_spaces.s: rate and period");
  refused(R"({"name": "s", "limit": 5, "rate": 5, "period_ms": 0})", "NULL",
          "key_spaces.s.period (period_ms) must be");
  refused(R"({"name": "s", "limit": 5, "rate": 3, "period_ms": 1000})", "4",
          "task type \"T\": rate_units must be from 1 to the rate of key space s (3)");
  refused(R"({"name": "s", "limit": 5, "rate": 3, "period_ms": 1000})", "0", "rate_units");
  BOOST_CHECK_EQUAL(db.scalar("SELECT count(*) FROM taskmill.task_types WHERE type = 'T'"), "0");
  BOOST_CHECK_EQUAL(db.scalar("SELECT count(*) FROM taskmill.key_spaces WHERE rate IS NOT NULL"),
                    "0");
  BOOST_CHECK_EQUAL(put_keyed(db, "T", R"({"name": "s", "limit": 5, "rate": 3, "period_ms": 1000})",
                              "'s'", "'$.t'", "NULL", "3"),
                    "");
  BOOST_CHECK_EQUAL(
      db.scalar("SELECT rate || '/' || rate_period_ms || ' ' || (SELECT rate_units "
                "FROM taskmill.task_types WHERE type = 'T') FROM taskmill.key_spaces"),
      "3/1000 3");
}

BOOST_AUTO_TEST_CASE(each_task_takes_its_key_and_class_as_submitted) {
  task_database db{"keysubmit"};
  BOOST_REQUIRE_EQUAL(put_keyed(db, "T", R"({"name": "tenants", "limit": 2, "class_path": "$.tier",
                                         "classes": {"pro": 5}})",
                                "'tenants'", "'$.tenant'", "NULL"),
                      "");
  BOOST_REQUIRE_EQUAL(
      put_keyed(db, "S", R"({"name": "hosts", "limit": 1})", "'hosts'", "NULL", "'/'"), "");
  db.call("submit('T', 'a', payload => '{\"tenant\": \"acme\", \"tier\": \"pro\"}')");
  db.call("submit('T', 'b', payload => '{\"tenant\": 42}')");
  db.call("submit('S', 'example.org/page/1')");
  db.call("submit('S', 'bare')");
  submit_tenant_tasks(db, "T", "zeta", 2, "free");
  BOOST_CHECK_EQUAL(
      db.scalar("SELECT string_agg(key || '=' || key_space || ':' || concurrency_key || ':' || "
                "coalesce(key_class, '-'), ' ' ORDER BY key COLLATE \"C\") FROM taskmill.tasks"),
      "a=tenants:acme:pro b=tenants:42:- bare=hosts:bare:- example.org/page/1=hosts:example.org:- "
      "zeta-1=tenants:zeta:free zeta-2=tenants:zeta:free");
  // A payload without its key is refused, naming the path; a batch names the task.
  auto error = db.error_of("SELECT taskmill.submit('T', 'c', payload => '{\"tenant\": {}}')");
  BOOST_CHECK_MESSAGE(
      error.find("payload: $.tenant, the concurrency key of type T") != std::string::npos, error);
  error = db.error_of(
      "SELECT * FROM taskmill.submit_batch('{T,T}', '{c,d}', NULL, "
      "ARRAY['{\"tenant\": \"x\"}', '{}']::jsonb[], NULL, NULL, NULL, NULL, NULL, NULL, NULL, "
      "NULL, NULL, NULL, NULL, NULL)");
  BOOST_CHECK_MESSAGE(error.find("tasks[1].payload: $.tenant") != std::string::npos, error);
  BOOST_CHECK_EQUAL(db.scalar("SELECT count(*) FROM taskmill.tasks WHERE key IN ('c', 'd')"), "0");
  // A reschedule that brings another payload moves the task to its key.
  db.call("reschedule('T', 'b', now(), '{\"tenant\": \"beta\"}')");
  BOOST_CHECK_EQUAL(db.scalar("SELECT concurrency_key FROM taskmill.tasks WHERE key = 'b'"),
                    "beta");
}

BOOST_AUTO_TEST_CASE(tasks_waiting_when_a_type_is_keyed_are_keyed_then) {
  task_database db{"keylater"};
  db.insert_tasks(3, "'T'", "now()");
  db.exec("UPDATE taskmill.tasks SET payload = jsonb_build_object('tenant', 'k' || (id % 2))");
  db.exec(
      "UPDATE taskmill.tasks SET payload = '{}' WHERE id = (SELECT max(id) FROM taskmill.tasks)");
  BOOST_REQUIRE_EQUAL(put_keyed(db, "T", tenants, "'tenants'", "'$.tenant'", "NULL"), "");
  BOOST_CHECK_EQUAL(db.scalar("SELECT string_agg(concurrency_key, ',' ORDER BY id) "
                              "FROM taskmill.tasks"),
                    "k1,k0,");
  // And no longer keyed once the type is not.
  BOOST_REQUIRE_EQUAL(put_keyed(db, "T", tenants, "NULL", "NULL", "NULL"), "");
  BOOST_CHECK_EQUAL(db.scalar("SELECT count(*) FROM taskmill.tasks WHERE key_space IS NOT NULL"),
                    "0");
}

BOOST_AUTO_TEST_CASE(a_task_run_again_is_keyed_as_its_type_says_then) {
  task_database db{"keyagain"};
  auto dead = db.call("submit('T', 'a', payload => '{\"tenant\": \"acme\"}')");
  db.exec("UPDATE taskmill.tasks SET status = 'dead' WHERE id = " + std::to_string(dead.id));
  BOOST_REQUIRE_EQUAL(put_keyed(db, "T", tenants, "'tenants'", "'$.tenant'", "NULL"), "");
  db.exec("SELECT taskmill.retry(" + std::to_string(dead.id) + ")");
  BOOST_CHECK_EQUAL(db.scalar("SELECT status || ' ' || key_space || ' ' || concurrency_key "
                              "FROM taskmill.tasks WHERE id = " +
                              std::to_string(dead.id)),
                    "pending tenants acme");
}

BOOST_AUTO_TEST_CASE(a_key_too_long_or_missing_under_a_strict_path_is_refused) {
  task_database db{"keystrict"};
  BOOST_REQUIRE_EQUAL(put_keyed(db, "T", tenants, "'tenants'", "'strict $.tenant'", "NULL"), "");
  auto error = db.error_of("SELECT taskmill.submit('T', 'a', payload => '{}')");
  BOOST_CHECK_MESSAGE(
      error.find("payload: strict $.tenant, the concurrency key of type T") != std::string::npos,
      error);
  error = db.error_of(
      "SELECT taskmill.submit('T', 'b', payload => jsonb_build_object('tenant', "
      "repeat('x', 501)))");
  BOOST_CHECK_MESSAGE(error.find("must be at most 500 characters") != std::string::npos, error);
}

// A type keyed without a key_path or a key_separator takes each task's key
// as given at submit; others refuse one, naming the field, and store
// nothing.
BOOST_AUTO_TEST_CASE(a_key_given_at_submit_keys_a_type_keyed_so) {
  task_database db{"keygiven"};
  BOOST_REQUIRE_EQUAL(put_keyed(db, "G", tenants, "'tenants'", "NULL", "NULL"), "");
  BOOST_REQUIRE_EQUAL(put_keyed(db, "T", tenants, "'tenants'", "'$.tenant'", "NULL"), "");
  db.exec("SELECT taskmill.submit('G', 'one', concurrency_key => 'acme')");
  db.exec("SELECT taskmill.submit('G', 'none')");
  db.exec(
      "SELECT count(*) FROM taskmill.submit_batch('{G,G}', '{two,three}', NULL, NULL, NULL, NULL, "
      "NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, '{acme,globex}')");
  BOOST_CHECK_EQUAL(db.scalar("SELECT string_agg(key || '=' || concurrency_key, ',' ORDER BY key) "
                              "FROM taskmill.tasks"),
                    "none=,one=acme,three=globex,two=acme");
  auto refused = [&](const std::string& sql, const std::string& naming) {
    auto error = db.error_of(sql);
    BOOST_CHECK_MESSAGE(error.find(naming) != std::string::npos,
                        "expected \"" << naming << "\" in: " << error);
  };
  refused(
      "SELECT taskmill.submit('T', 'x', payload => '{\"tenant\": \"a\"}', concurrency_key "
      "=> 'b')",
      "concurrency_key: type T takes its key from payload $.tenant");
  refused("SELECT taskmill.submit('U', 'x', concurrency_key => 'b')",
          "concurrency_key: type U has no key space");
  refused("SELECT taskmill.submit('G', 'x', concurrency_key => repeat('k', 501))",
          "concurrency_key must be at most 500 characters");
  refused(
      "SELECT taskmill.submit_batch('{G,U}', '{y,z}', NULL, NULL, NULL, NULL, NULL, NULL, "
      "NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, '{a,b}')",
      "tasks[1].concurrency_key: type U has no key space");
  BOOST_CHECK_EQUAL(db.scalar("SELECT count(*) FROM taskmill.tasks"), "4");
  // A workflow's steps, likewise.
  refused(
      "SELECT taskmill.submit_workflow('wf', NULL, '{a,b}', NULL, 10000, '{G,T}', NULL, "
      "NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, "
      "NULL, NULL, '{k1,k2}')",
      "steps[1].concurrency_key: type T takes its key");
  db.exec(
      "SELECT taskmill.submit_workflow('wf', NULL, '{a}', NULL, 10000, '{G}', NULL, NULL, "
      "NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, "
      "NULL, '{initech}')");
  BOOST_CHECK_EQUAL(db.scalar("SELECT concurrency_key FROM taskmill.tasks t JOIN "
                              "taskmill.workflow_steps s ON s.task_id = t.id"),
                    "initech");
  db.exec("DELETE FROM taskmill.tasks WHERE concurrency_key = 'initech'");
  // Run again after it ended, a task keeps the key it was given.
  db.exec("UPDATE taskmill.tasks SET status = 'dead' WHERE key = 'one'");
  db.exec("UPDATE taskmill.tasks SET status = 'pending' WHERE key = 'one'");
  BOOST_CHECK_EQUAL(db.scalar("SELECT concurrency_key FROM taskmill.tasks WHERE key = 'one'"),
                    "acme");
  // Cancelled and rescheduled, it comes back under the key it was given.
  db.exec("SELECT taskmill.cancel('G', 'two')");
  db.exec("SELECT taskmill.reschedule('G', 'two', now())");
  BOOST_CHECK_EQUAL(db.scalar("SELECT concurrency_key FROM taskmill.tasks WHERE key = 'two' AND "
                              "status = 'pending'"),
                    "acme");
  // Each given key has its own limit (2).
  auto conn = db.connect();
  auto taken = counts(claim_keys(conn, 100));
  BOOST_CHECK_EQUAL(taken["acme"], 2);
  BOOST_CHECK_EQUAL(taken["globex"], 1);
  BOOST_CHECK_EQUAL(taken[""], 1);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(keyed_claims)

BOOST_AUTO_TEST_CASE(no_key_passes_its_limit_and_named_keys_and_classes_have_their_own) {
  task_database db{"keylimits"};
  BOOST_REQUIRE_EQUAL(put_keyed(db, "T", R"({"name": "tenants", "limit": 2, "keys": {"acme": 4},
                                         "class_path": "$.tier", "classes": {"free": 1}})",
                                "'tenants'", "'$.tenant'", "NULL"),
                      "");
  submit_tenant_tasks(db, "T", "acme", 10);
  submit_tenant_tasks(db, "T", "cheap", 10, "free");
  submit_tenant_tasks(db, "T", "plain", 10);
  db.insert_tasks(5, "'U'", "now()");
  auto conn = db.connect();
  auto first = claim_keys(conn, 100);
  auto taken = counts(first);
  BOOST_CHECK_EQUAL(taken["acme"], 4);
  BOOST_CHECK_EQUAL(taken["cheap"], 1);
  BOOST_CHECK_EQUAL(taken["plain"], 2);
  // The type without keys beside them is claimed as ever.
  BOOST_CHECK_EQUAL(
      db.scalar("SELECT count(*) FROM taskmill.tasks WHERE type = 'U' AND status = 'running'"),
      "5");
  BOOST_CHECK(claim_keys(conn, 100).empty());
  db.exec("INSERT INTO taskmill.nodes (name, incarnation) VALUES ('n1', 'i1')");
  BOOST_CHECK_EQUAL(
      db.scalar("SELECT reason || ': ' || message FROM taskmill.waiting_reason((SELECT min(id) "
                "FROM taskmill.tasks WHERE concurrency_key = 'acme' AND status = 'pending'), "
                "5000, 1000, 0, '{16,8,4,2,1}')"),
      "key_limit_full: key acme of key space tenants is full: 4 of 4 running");
  // An attempt that ends makes room for one more of its key.
  BOOST_REQUIRE_EQUAL(
      db.scalar("SELECT count(*) FROM taskmill.complete_many(ARRAY(SELECT id FROM taskmill.tasks "
                "WHERE concurrency_key = 'cheap' AND status = 'running'), ARRAY[1], '{succeeded}', "
                "NULL, NULL, 'n1')"),
      "1");
  BOOST_CHECK((claim_keys(conn, 100) == std::vector<std::string>{"cheap"}));
  // A limit raised takes effect at the next claim.
  db.exec("UPDATE taskmill.key_spaces SET key_limit = 3");
  BOOST_CHECK((claim_keys(conn, 100) == std::vector<std::string>{"plain"}));
}

BOOST_AUTO_TEST_CASE(keys_take_turns_whatever_one_keys_backlog) {
  task_database db{"keyturns"};
  BOOST_REQUIRE_EQUAL(put_keyed(db, "T", R"({"name": "tenants", "limit": 1000})", "'tenants'",
                                "'$.tenant'", "NULL"),
                      "");
  // The big key's tasks are all older than the small keys'.
  submit_tenant_tasks(db, "T", "big", 2000);
  for (int k = 0; k < 30; ++k) submit_tenant_tasks(db, "T", "small" + std::to_string(100 + k), 1);
  auto conn = db.connect();
  // Keys take turns of up to 5 tasks: four claims of 10 serve each small key
  // once, the big key twice (a turn in the first claim, then in the last).
  std::map<std::string, int> served;
  std::vector<int> big_per_claim;
  for (int claim = 0; claim < 4; ++claim) {
    auto keys = counts(claim_keys(conn, 10));
    big_per_claim.push_back(keys["big"]);
    for (const auto& [key, n] : keys) served[key] += n;
  }
  BOOST_CHECK_EQUAL(served.size(), 31u);
  for (const auto& [key, n] : served)
    if (key != "big") BOOST_CHECK_MESSAGE(n == 1, key << " served " << n << " times");
  BOOST_CHECK((big_per_claim == std::vector<int>{5, 0, 0, 5}));
  // With the small keys drained, the big key has the whole claim.
  BOOST_CHECK_EQUAL(counts(claim_keys(conn, 50))["big"], 50);
}

BOOST_AUTO_TEST_CASE(a_keyed_claim_locks_no_task_beyond_a_keys_room) {
  task_database db{"keylocks"};
  BOOST_REQUIRE_EQUAL(put_keyed(db, "T", tenants, "'tenants'", "'$.tenant'", "NULL"), "");
  submit_tenant_tasks(db, "T", "full", 20);
  auto claimer = db.connect();
  BOOST_REQUIRE(claimer.exec("BEGIN"));
  BOOST_CHECK_EQUAL(claim_keys(claimer, 20).size(), 2u);
  // With that claim open, every other task of the key is free to lock.
  BOOST_CHECK_EQUAL(db.scalar("SELECT count(*) FROM (SELECT id FROM taskmill.tasks "
                              "WHERE status = 'pending' FOR UPDATE SKIP LOCKED) l"),
                    "18");
  BOOST_REQUIRE(claimer.exec("COMMIT"));
}

// A space shared by two types, a node that runs one of them: keys whose
// oldest task is of the other still give it theirs; and a type of the space
// at its own running limit leaves the other its room.
BOOST_AUTO_TEST_CASE(a_node_takes_its_own_types_of_a_shared_space) {
  task_database db{"keyshared"};
  BOOST_REQUIRE_EQUAL(put_keyed(db, "X", tenants, "'tenants'", "'$.tenant'", "NULL"), "");
  BOOST_REQUIRE_EQUAL(put_keyed(db, "Y", tenants, "'tenants'", "'$.tenant'", "NULL"), "");
  for (int k = 0; k < 20; ++k) {
    submit_tenant_tasks(db, "Y", "t" + std::to_string(k), 1);
    submit_tenant_tasks(db, "X", "t" + std::to_string(k), 1);
  }
  auto conn = db.connect();
  auto claimed = conn.exec(
      "SELECT count(*) FILTER (WHERE c.type = 'X'), count(*) FROM taskmill.claim_by_turns('n1', "
      "20, '{3}', '{}', '{}', 0, '{X}', NULL, NULL) c");
  BOOST_REQUIRE_MESSAGE(claimed, test::describe(claimed));
  BOOST_CHECK_EQUAL(claimed->string(0, 0), "20");
  BOOST_CHECK_EQUAL(claimed->string(0, 1), "20");
  // X held to 0 more by a limit of its own: Y still gets the keys' room.
  claimed = conn.exec(
      "SELECT count(*) FILTER (WHERE c.type = 'Y'), count(*) FROM taskmill.claim_by_turns('n1', "
      "40, '{3}', '{X}', '{20}', 0, NULL, NULL, NULL) c");
  BOOST_REQUIRE_MESSAGE(claimed, test::describe(claimed));
  BOOST_CHECK_EQUAL(claimed->string(0, 0), "20");
  BOOST_CHECK_EQUAL(claimed->string(0, 1), "20");
}

// A space whose types give no key: one key, '', for all of them, so that its
// limits hold for those types together.
BOOST_AUTO_TEST_CASE(types_that_give_no_key_share_their_spaces_limits) {
  task_database db{"keyshareall"};
  const std::string downstream = R"({"name": "downstream", "limit": 2})";
  BOOST_REQUIRE_EQUAL(put_keyed(db, "P", downstream, "'downstream'", "NULL", "NULL"), "");
  BOOST_REQUIRE_EQUAL(put_keyed(db, "Q", downstream, "'downstream'", "NULL", "NULL"), "");
  submit_tenant_tasks(db, "P", "a", 5);
  submit_tenant_tasks(db, "Q", "b", 5);
  BOOST_CHECK_EQUAL(db.scalar("SELECT string_agg(DISTINCT '[' || concurrency_key || ']', ',') "
                              "FROM taskmill.tasks"),
                    "[]");
  auto conn = db.connect();
  BOOST_CHECK_EQUAL(claim_keys(conn, 100).size(), 2u);
  BOOST_CHECK(claim_keys(conn, 100).empty());
}

// A key starts at most its rate in a period, whatever its running limit
// leaves; a start costs its type's units; waiting says when the next may
// start, and so does the next due time the pusher waits for.
BOOST_AUTO_TEST_CASE(no_key_starts_more_than_its_rate_in_a_period) {
  task_database db{"keyrate"};
  BOOST_REQUIRE_EQUAL(
      put_keyed(db, "T", R"({"name": "api", "limit": 100, "rate": 3, "period_ms": 60000})", "'api'",
                "'$.tenant'", "NULL"),
      "");
  BOOST_REQUIRE_EQUAL(
      put_keyed(db, "B", R"({"name": "bulk", "limit": 100, "rate": 5, "period_ms": 60000})",
                "'bulk'", "'$.tenant'", "NULL", "2"),
      "");
  submit_tenant_tasks(db, "T", "a", 10);
  submit_tenant_tasks(db, "T", "b", 10);
  submit_tenant_tasks(db, "B", "x", 10);
  // Due a while ago: the next due time is the keys' rate alone.
  db.exec("UPDATE taskmill.tasks SET execute_at = execute_at - interval '5 s'");
  auto conn = db.connect();
  auto taken = counts(claim_keys(conn, 100));
  BOOST_CHECK_EQUAL(taken["a"], 3);
  BOOST_CHECK_EQUAL(taken["b"], 3);
  BOOST_CHECK_EQUAL(taken["x"], 2);  // 4 of its 5 units
  // Ended, their starts still count for the period.
  db.exec("UPDATE taskmill.tasks SET status = 'succeeded' WHERE status = 'running'");
  BOOST_CHECK(claim_keys(conn, 100).empty());
  db.exec("INSERT INTO taskmill.nodes (name, incarnation) VALUES ('n1', 'i1')");
  auto waiting = db.exec(
      "SELECT w.reason || ': ' || w.message, extract(epoch FROM w.until - now()) FROM "
      "taskmill.waiting_reason((SELECT min(id) FROM taskmill.tasks WHERE concurrency_key = 'a' "
      "AND status = 'pending'), 5000, 1000, 0, '{16,8,4,2,1}') w");
  BOOST_CHECK_MESSAGE(waiting.string(0, 0).find("rate_limited: key a of key space api is at its "
                                                "rate: 3 units started in the last 60000 ms") == 0,
                      waiting.string(0, 0));
  BOOST_CHECK_CLOSE(std::stod(waiting.string(0, 1)), 60.0, 5.0);
  auto next_due = db.scalar(
      "SELECT extract(epoch FROM next_due_at - db_now) FROM taskmill.next_due(NULL, 120000, 'n1')");
  BOOST_CHECK_CLOSE(std::stod(next_due), 60.0, 5.0);
  // A period later, each key starts its rate again.
  db.exec(
      "UPDATE taskmill.key_starts SET starts = ARRAY(SELECT s - interval '60 s' FROM "
      "unnest(starts) s)");
  taken = counts(claim_keys(conn, 100));
  BOOST_CHECK_EQUAL(taken["a"], 3);
  BOOST_CHECK_EQUAL(taken["b"], 3);
  BOOST_CHECK_EQUAL(taken["x"], 2);
  // One slot of a key a period old frees one start, not three.
  db.exec("UPDATE taskmill.tasks SET status = 'succeeded' WHERE status = 'running'");
  db.exec(
      "UPDATE taskmill.key_starts SET starts = ARRAY(SELECT s - CASE WHEN o = 1 THEN "
      "interval '60 s' ELSE interval '0 s' END FROM unnest(starts) WITH ORDINALITY u(s, o)) "
      "WHERE key = 'a'");
  BOOST_CHECK((claim_keys(conn, 100) == std::vector<std::string>{"a"}));
  // A rate lowered below what a start of the space's type costs still
  // lets one start a period.
  db.exec("UPDATE taskmill.key_spaces SET rate = 1 WHERE name = 'bulk'");
  db.exec(
      "UPDATE taskmill.key_starts SET starts = ARRAY(SELECT s - interval '60 s' FROM "
      "unnest(starts) s)");
  BOOST_CHECK_EQUAL(counts(claim_keys(conn, 100))["x"], 1);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(races)

// Five claimers over 200 keys (limits 1 to 3, a class and named keys among
// them), ending attempts as successes, retries and cancels; at every commit
// that starts a keyed task, a check in the test database counts that key's
// running tasks against its limit.
BOOST_AUTO_TEST_CASE(racing_claimers_never_pass_a_key_limit) {
  task_database db{"keyrace"};
  BOOST_REQUIRE_EQUAL(
      put_keyed(db, "T", R"({"name": "tenants", "limit": 2, "keys": {"t7": 3, "t8": 1},
                                         "class_path": "$.tier", "classes": {"free": 1}})",
                "'tenants'", "'$.tenant'", "NULL"),
      "");
  check_key_limits_at_commit(db);
  constexpr int keys = 200, per_key = 8;
  for (int k = 0; k < keys; ++k)
    submit_tenant_tasks(db, "T", "t" + std::to_string(k), per_key, k % 10 == 5 ? "free" : "");
  db.exec("UPDATE taskmill.tasks SET priority = 1 + id % 5");
  race_record record;
  std::atomic<int> stale{0};
  race_five_claimers(db, record, stale);
  BOOST_CHECK_EQUAL(key_limits_passed(db), 0);
  BOOST_TEST_MESSAGE(
      "keyed claims checked: " << db.scalar("SELECT sum(attempt) FROM taskmill.tasks"));
  check_every_task_ran_once_an_attempt(db, record, stale, keys * per_key);
}

// Five claimers over 20 keys at a rate of 3 starts in 25 ms, retrying a
// third: every start is logged, and no window of 25 ms holds more than 3
// starts of a key.
BOOST_AUTO_TEST_CASE(racing_claimers_never_pass_a_key_rate) {
  task_database db{"keyraterace"};
  BOOST_REQUIRE_EQUAL(
      put_keyed(db, "T", R"({"name": "tenants", "limit": 1000, "rate": 3, "period_ms": 25})",
                "'tenants'", "'$.tenant'", "NULL"),
      "");
  db.exec(R"sql(
    CREATE TABLE key_start_log (key text, started_at timestamptz);
    CREATE FUNCTION log_key_start() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      INSERT INTO key_start_log VALUES (NEW.concurrency_key, NEW.started_at);
      RETURN NULL;
    END $$;
    CREATE TRIGGER key_start_logged AFTER UPDATE OF status ON taskmill.tasks
      FOR EACH ROW WHEN (NEW.status = 'running' AND OLD.status <> 'running')
      EXECUTE FUNCTION log_key_start();
  )sql");
  constexpr int keys = 20, per_key = 20;
  for (int k = 0; k < keys; ++k) submit_tenant_tasks(db, "T", "t" + std::to_string(k), per_key);
  db.exec("UPDATE taskmill.tasks SET priority = 1 + id % 5");
  race_record record;
  std::atomic<int> stale{0};
  race_five_claimers(db, record, stale);
  auto windows = db.exec(
      "SELECT count(*) FILTER (WHERE w.n > 3), max(w.n), count(*) FROM (SELECT (SELECT count(*) "
      "FROM key_start_log b WHERE b.key = a.key AND b.started_at >= a.started_at AND "
      "b.started_at < a.started_at + interval '25 ms') AS n FROM key_start_log a) w");
  BOOST_TEST_MESSAGE("starts logged: " << windows.string(0, 2)
                                       << ", most in a window: " << windows.string(0, 1));
  BOOST_CHECK_EQUAL(windows.string(0, 0), "0");
  BOOST_CHECK_EQUAL(windows.string(0, 1), "3");
  check_every_task_ran_once_an_attempt(db, record, stale, keys * per_key);
}

// Four connections put each of 50 new spaces at once: each space is told
// created (the API's 201) to exactly one of them.
BOOST_AUTO_TEST_CASE(racing_puts_of_a_new_space_create_it_once) {
  task_database db{"keyspaceputs"};
  constexpr int putters = 4, spaces = 50;
  std::barrier start_together{putters};
  std::vector<std::vector<bool>> created(putters, std::vector<bool>(spaces));
  std::vector<std::string> errors(putters);
  std::vector<std::thread> threads;
  for (int p = 0; p < putters; ++p)
    threads.emplace_back([&, p] {
      auto conn = db.connect();
      for (int s = 0; s < spaces; ++s) {
        start_together.arrive_and_wait();
        auto res = conn.exec("SELECT taskmill.put_key_space('{\"name\": \"s" + std::to_string(s) +
                             "\", \"limit\": " + std::to_string(p + 1) + "}')");
        if (res)
          created[p][s] = res->boolean(0, 0);
        else
          errors[p] = test::describe(res);
      }
    });
  for (auto& t : threads) t.join();
  for (const auto& error : errors) BOOST_REQUIRE_EQUAL(error, "");
  for (int s = 0; s < spaces; ++s) {
    int told = 0;
    for (int p = 0; p < putters; ++p) told += created[p][s];
    BOOST_CHECK_MESSAGE(told == 1, "space s" << s << " told created " << told << " times");
  }
}

BOOST_AUTO_TEST_SUITE_END()
