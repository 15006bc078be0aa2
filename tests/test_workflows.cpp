// SPEC §10, dependencies: tasks submitted `after` others, against the SQL
// functions the nodes and business services share, with concurrent
// connections where finishes and submits race, and through a node.
#define BOOST_TEST_MODULE workflows
#include <boost/test/unit_test.hpp>

#include "messages/errors.hpp"
#include "tests/support/nodes.hpp"
#include "tests/support/scripted_executor.hpp"
#include "tests/support/task_sql.hpp"
#include "tools/http_fetch.hpp"
#include "tools/node_process.hpp"

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdlib>
#include <future>
#include <latch>
#include <map>
#include <memory>
#include <thread>

using namespace taskmill;
using nlohmann::json;
using namespace std::chrono_literals;
using test::task_database;
using test::task_row;

namespace {

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

bool waits(const task_row& t) {
  return t.status == "pending" && std::isinf(t.execute_in_s);
}

std::string id(const task_row& t) {
  return std::to_string(t.id);
}

/// Claims task `t` alone (it must be due) and answers its attempt.
int run(const task_database& db, const task_row& t) {
  db.exec("UPDATE taskmill.tasks SET priority = 1 WHERE id = $1", {id(t)});
  auto claimed = db.claim(1);
  BOOST_REQUIRE_EQUAL(claimed.size(), 1u);
  BOOST_REQUIRE_EQUAL(claimed[0].id, t.id);
  return claimed[0].attempt;
}

/// Runs task `t` to `outcome` (succeeded, fail: dead).
void finish(const task_database& db, const task_row& t, const std::string& outcome) {
  BOOST_REQUIRE(db.complete(t.id, run(db, t), outcome, outcome == "succeeded" ? "" : "broken"));
}

/// A node's report that task `id` succeeded under `attempt`, as SQL.
std::string complete_sql(int64_t id, int attempt) {
  return "SELECT applied FROM taskmill.complete_many(ARRAY[" + std::to_string(id) +
         "::bigint], ARRAY[" + std::to_string(attempt) +
         "], ARRAY['succeeded'], ARRAY[NULL::jsonb], ARRAY[NULL], 'n1')";
}

std::string count_tasks(const task_database& db) {
  return db.scalar(
      "SELECT count(*) || '/' || (SELECT count(*) FROM taskmill.task_edges) || '/' || "
      "(SELECT count(*) FROM taskmill.task_waits) FROM taskmill.tasks");
}

}  // namespace

BOOST_AUTO_TEST_SUITE(dependencies)

BOOST_AUTO_TEST_CASE(a_child_is_never_claimed_before_its_last_parent_finishes) {
  task_database db{"after"};
  auto a = db.call("submit('EXTRACT', 'a')");
  auto b = db.call("submit('EXTRACT', 'b')");
  auto c = db.call("submit('LOAD', 'c', after => '[" + id(a) +
                   ", {\"type\": \"EXTRACT\", \"key\": \"b\"}]')");
  BOOST_CHECK_EQUAL(c.outcome, "created");
  BOOST_CHECK(waits(c));
  auto claimed = db.claim(10);
  BOOST_REQUIRE_EQUAL(claimed.size(), 2u);
  BOOST_REQUIRE(db.complete(a.id, claimed[0].id == a.id ? claimed[0].attempt : claimed[1].attempt,
                            "succeeded"));
  BOOST_CHECK(waits(db.by_id(c.id)));
  BOOST_CHECK(db.claim(10).empty());
  BOOST_CHECK_EQUAL(db.scalar("SELECT reason || ': ' || message || ' ' || parents::text FROM "
                              "taskmill.waiting_reason($1, 30000, 1000, 0, '{1,1,1,1,1}')",
                              {id(c)}),
                    "waiting_for_parents: waits for 1 unfinished parent: " + id(b) +
                        "; due at once after them {" + id(b) + "}");

  // The child is due in the transaction of its last parent's outcome.
  auto conn = db.connect();
  BOOST_REQUIRE(conn.exec("BEGIN"));
  auto attempt = claimed[0].id == b.id ? claimed[0].attempt : claimed[1].attempt;
  BOOST_REQUIRE(conn.exec(complete_sql(b.id, attempt)));
  auto inside = conn.exec("SELECT execute_at <= now() FROM taskmill.tasks WHERE id = " + id(c));
  BOOST_REQUIRE(inside);
  BOOST_CHECK_EQUAL(inside->string(0, 0), "t");
  BOOST_CHECK(waits(db.by_id(c.id)));
  BOOST_REQUIRE(conn.exec("COMMIT"));
  auto due = db.claim(10);
  BOOST_REQUIRE_EQUAL(due.size(), 1u);
  BOOST_CHECK_EQUAL(due[0].id, c.id);
  BOOST_CHECK_EQUAL(db.scalar("SELECT count(*) FROM taskmill.task_waits"), "0");
}

// A success moves its task out of the live tasks (an insert among the
// successes, which fires no update trigger): one that does not come as an
// outcome (a parent job's children fired, say) settles its children too.
BOOST_AUTO_TEST_CASE(a_success_other_than_an_outcome_releases_the_children) {
  task_database db{"after_moved"};
  auto parent = db.call("submit('EXTRACT', 'p')");
  auto child = db.call("submit('LOAD', 'c', after => '[" + id(parent) + "]')");
  BOOST_REQUIRE(waits(child));
  BOOST_REQUIRE_EQUAL(db.claim(10).size(), 1u);
  db.exec(
      "UPDATE taskmill.tasks SET status = 'succeeded', finished_at = now(), updated_at = now() "
      "WHERE id = $1",
      {id(parent)});
  BOOST_CHECK_EQUAL(db.scalar("SELECT tableoid = 'taskmill.succeeded_tasks'::regclass FROM "
                              "taskmill.tasks WHERE id = $1",
                              {id(parent)}),
                    "t");
  BOOST_CHECK(!waits(db.by_id(child.id)));
  auto due = db.claim(10);
  BOOST_REQUIRE_EQUAL(due.size(), 1u);
  BOOST_CHECK_EQUAL(due[0].id, child.id);
}

BOOST_AUTO_TEST_CASE(a_child_of_finished_parents_is_due_at_once_or_at_its_time) {
  task_database db{"after_done"};
  auto a = db.call("submit('EXTRACT', 'a')");
  finish(db, a, "succeeded");
  auto now = db.call("submit('LOAD', 'now', after => '[" + id(a) + "]')");
  BOOST_CHECK_EQUAL(now.status, "pending");
  BOOST_CHECK_LE(now.execute_in_s, 0.0);
  auto later = db.call(
      "submit('LOAD', 'later', execute_at => now() + interval '1 hour', "
      "after => '[" +
      id(a) + "]')");
  BOOST_CHECK_GT(later.execute_in_s, 3500.0);
  // A child waiting for a parent is due at its own time once the parent is done.
  auto b = db.call("submit('EXTRACT', 'b')");
  auto timed = db.call(
      "submit('LOAD', 'timed', execute_at => now() + interval '1 hour', "
      "after => '[" +
      id(b) + "]')");
  BOOST_CHECK(waits(timed));
  finish(db, b, "succeeded");
  BOOST_CHECK_GT(db.by_id(timed.id).execute_in_s, 3500.0);
}

BOOST_AUTO_TEST_CASE(a_failed_parent_fails_skips_or_lets_run_each_child_down_the_graph) {
  task_database db{"after_policies"};
  auto p = db.call("submit('EXTRACT', 'p')");
  auto failed = db.call("submit('T', 'failed', after => '[" + id(p) + "]')");
  auto grandchild = db.call("submit('T', 'grandchild', after => '[" + id(failed) + "]')");
  auto runs =
      db.call("submit('T', 'runs', after => '[" + id(p) + "]', on_parent_failure => 'run')");
  auto skipped = db.call("submit('T', 'skipped', after => '[{\"id\": " + id(p) +
                         ", \"on_failure\": \"skip\"}]')");
  auto after_skipped = db.call("submit('T', 'after_skipped', after => '[" + id(skipped) + "]')");
  finish(db, p, "fail");

  auto f = db.by_id(failed.id);
  BOOST_CHECK_EQUAL(f.status, "cancelled");
  BOOST_CHECK_EQUAL(f.error, "parent " + id(p) + " ended dead");
  BOOST_CHECK_LT(f.execute_in_s, 1.0);
  auto g = db.by_id(grandchild.id);
  BOOST_CHECK_EQUAL(g.status, "cancelled");
  BOOST_CHECK_EQUAL(g.error, "parent " + id(failed) + " ended cancelled");
  auto r = db.by_id(runs.id);
  BOOST_CHECK_EQUAL(r.status, "pending");
  BOOST_CHECK_LE(r.execute_in_s, 0.0);
  auto s = db.by_id(skipped.id);
  BOOST_CHECK_EQUAL(s.status, "stopped");
  BOOST_CHECK_EQUAL(s.error, "skipped: parent " + id(p) + " ended dead");
  // A skipped parent is done, not failed: its children go on.
  BOOST_CHECK_LE(db.by_id(after_skipped.id).execute_in_s, 0.0);
  BOOST_CHECK_EQUAL(db.scalar("SELECT count(*) FROM taskmill.task_waits"), "0");
  BOOST_CHECK_EQUAL(db.scalar("SELECT count(*) FROM taskmill.task_edges WHERE NOT done"), "0");

  // Children submitted after a parent that already failed begin as it left them.
  auto late = db.call("submit('T', 'late', after => '[" + id(p) + "]')");
  BOOST_CHECK_EQUAL(late.status, "cancelled");
  BOOST_CHECK_EQUAL(late.error, "parent " + id(p) + " ended dead");
  BOOST_CHECK_EQUAL(
      db.call("submit('T', 'late_skip', after => '[" + id(p) + "]', on_parent_failure => 'skip')")
          .status,
      "stopped");
}

BOOST_AUTO_TEST_CASE(a_cancelled_parent_or_child_settles_the_graph) {
  task_database db{"after_cancel"};
  auto p = db.call("submit('EXTRACT', 'p')");
  auto c = db.call("submit('T', 'c', after => '[" + id(p) + "]')");
  auto d = db.call("submit('T', 'd', after => '[" + id(c) + "]', on_parent_failure => 'run')");
  BOOST_CHECK_EQUAL(db.call("cancel(" + id(c) + "::bigint)").outcome, "cancelled");
  BOOST_CHECK_EQUAL(
      db.scalar("SELECT count(*) FROM taskmill.task_waits WHERE task_id = $1", {id(c)}), "0");
  BOOST_CHECK_LT(db.by_id(c.id).execute_in_s, 1.0);
  BOOST_CHECK_LE(db.by_id(d.id).execute_in_s, 0.0);
  // The parent finishing later changes nothing for the cancelled child.
  finish(db, p, "succeeded");
  BOOST_CHECK_EQUAL(db.by_id(c.id).status, "cancelled");
  // Superseded by a higher version, a parent is cancelled for its children.
  auto q = db.call("submit('EXTRACT', 'q')");
  auto e = db.call("submit('T', 'e', after => '[" + id(q) + "]')");
  db.call("submit('EXTRACT', 'q', version => 1)");
  BOOST_CHECK_EQUAL(db.by_id(e.id).status, "cancelled");
}

// A waiting task is not retried; one that ended before its parents did and
// is brought back waits for them again.
BOOST_AUTO_TEST_CASE(a_task_brought_back_waits_again_for_its_unfinished_parents) {
  task_database db{"after_retry"};
  auto p = db.call("submit('EXTRACT', 'p')");
  auto c = db.call("submit('T', 'c', after => '[" + id(p) + "]')");
  auto refused = db.error_of("SELECT taskmill.retry(" + id(c) + ")");
  BOOST_CHECK_MESSAGE(contains(refused, "task " + id(c) + " waits for its parents"), refused);
  db.call("cancel(" + id(c) + "::bigint)");
  BOOST_CHECK_EQUAL(db.scalar("SELECT (taskmill.retry(" + id(c) + ")).execute_at::text"),
                    "infinity");
  BOOST_CHECK(waits(db.by_id(c.id)));
  finish(db, p, "succeeded");
  BOOST_CHECK_LE(db.by_id(c.id).execute_in_s, 0.0);
  BOOST_CHECK_EQUAL(db.scalar("SELECT count(*) FROM taskmill.task_waits"), "0");
}

// A parent retried after it ended dead, or after its success (brought back
// from the successes' partition: a delete there, no update trigger): a
// child that runs anyway and still waits for another parent waits for the
// retry too.
BOOST_AUTO_TEST_CASE(a_retried_parent_holds_back_its_waiting_children_again) {
  for (std::string ended : {"fail", "succeeded"}) {
    BOOST_TEST_CONTEXT(ended) {
      task_database db{"after_parent_retry_" + ended};
      auto p1 = db.call("submit('EXTRACT', 'p1')");
      auto p2 = db.call("submit('EXTRACT', 'p2')");
      auto c = db.call("submit('T', 'c', after => '[" + id(p1) + ", " + id(p2) +
                       "]', on_parent_failure => 'run')");
      finish(db, p1, ended);
      BOOST_CHECK(waits(db.by_id(c.id)));
      db.exec("SELECT taskmill.retry(" + id(p1) + ")");
      finish(db, p2, "succeeded");
      BOOST_CHECK(waits(db.by_id(c.id)));
      finish(db, db.by_id(p1.id), "succeeded");
      BOOST_CHECK_LE(db.by_id(c.id).execute_in_s, 0.0);
      BOOST_CHECK_EQUAL(db.scalar("SELECT count(*) FROM taskmill.task_waits"), "0");
    }
  }
}

// A child a failed parent skipped, submitted again, waits for its other
// parent, and the answer says so.
BOOST_AUTO_TEST_CASE(a_skipped_child_submitted_again_waits_for_its_other_parents) {
  task_database db{"after_resubmit"};
  auto p1 = db.call("submit('EXTRACT', 'p1')");
  auto p2 = db.call("submit('EXTRACT', 'p2')");
  auto c = db.call("submit('T', 'c', after => '[" + id(p1) + ", " + id(p2) +
                   "]', on_parent_failure => 'skip')");
  finish(db, p1, "fail");
  BOOST_CHECK_EQUAL(db.by_id(c.id).status, "stopped");
  auto again = db.call("submit('T', 'c')");
  BOOST_CHECK_EQUAL(again.outcome, "replaced");
  BOOST_CHECK(waits(again));
  finish(db, p2, "succeeded");
  BOOST_CHECK_LE(db.by_id(c.id).execute_in_s, 0.0);
}

// A transaction whose snapshot is older than its statements could miss a
// child submitted meanwhile: a parent finishes only in read committed.
BOOST_AUTO_TEST_CASE(a_parent_finishes_only_in_a_read_committed_transaction) {
  task_database db{"after_isolation"};
  auto p = db.call("submit('EXTRACT', 'p')");
  db.call("submit('T', 'c', after => '[" + id(p) + "]')");
  auto conn = db.connect();
  BOOST_REQUIRE(conn.exec("BEGIN ISOLATION LEVEL REPEATABLE READ"));
  auto res = conn.exec("SELECT taskmill.cancel(" + id(p) + "::bigint)");
  BOOST_REQUIRE(!res);
  BOOST_CHECK(contains(error_message(res.error()), "finishes only in a read committed"));
  BOOST_REQUIRE(conn.exec("ROLLBACK"));
  BOOST_CHECK_EQUAL(db.by_id(p.id).status, "pending");
}

BOOST_AUTO_TEST_CASE(replacing_or_rescheduling_a_waiting_child_keeps_it_waiting) {
  task_database db{"after_replace"};
  auto p = db.call("submit('EXTRACT', 'p')");
  auto c = db.call("submit('T', 'c', after => '[" + id(p) + "]')");
  auto replaced = db.call("submit('T', 'c', payload => '{\"n\": 2}')");
  BOOST_CHECK_EQUAL(replaced.outcome, "replaced");
  BOOST_CHECK(waits(replaced));
  auto moved = db.call("reschedule('T', 'c', now() + interval '1 hour')");
  BOOST_CHECK_EQUAL(moved.outcome, "updated");
  BOOST_CHECK(waits(moved));
  finish(db, p, "succeeded");
  auto c2 = db.by_id(c.id);
  BOOST_CHECK_EQUAL(c2.payload, "{\"n\": 2}");
  BOOST_CHECK_GT(c2.execute_in_s, 3500.0);
}

BOOST_AUTO_TEST_CASE(a_running_parent_rescheduled_hands_its_children_to_its_copy) {
  task_database db{"after_recreate"};
  auto p = db.call("submit('EXTRACT', 'p')");
  auto c = db.call("submit('T', 'c', after => '[" + id(p) + "]')");
  run(db, p);
  auto copy = db.call("reschedule('EXTRACT', 'p', now())");
  BOOST_REQUIRE_EQUAL(copy.outcome, "recreated");
  BOOST_CHECK(waits(db.by_id(c.id)));
  finish(db, copy, "succeeded");
  BOOST_CHECK_LE(db.by_id(c.id).execute_in_s, 0.0);
}

BOOST_AUTO_TEST_CASE(bad_references_are_refused_naming_the_field_and_change_nothing) {
  task_database db{"after_bad"};
  auto a = db.call("submit('EXTRACT', 'a')");
  auto before = count_tasks(db);
  auto refused = [&](const std::string& args, const std::string& message) {
    auto error = db.error_of("SELECT * FROM taskmill.submit('T', 'c', " + args + ")");
    BOOST_CHECK_MESSAGE(contains(error, message), error << " lacks " << message);
  };
  refused("after => '[999999]'", "after[0]: no task 999999");
  refused("after => '[" + id(a) + ", {\"type\": \"EXTRACT\", \"key\": \"zz\"}]'",
          "after[1]: no task of type \"EXTRACT\" with key \"zz\"");
  refused("after => '{\"id\": 1}'", "after must be an array");
  refused("after => '[" + id(a) + ", " + id(a) + "]'",
          "after[1] names task " + id(a) + " a second time");
  refused("after => '[\"x\"]'", "after[0] must be a task id or {\"type\", \"key\"}");
  refused("after => '[1.5]'", "after[0] must be a task id");
  refused("after => '[{\"id\": " + id(a) + ", \"key\": \"a\"}]'", "after[0] names a task by id or");
  refused("after => '[{\"id\": " + id(a) + ", \"on_failure\": \"maybe\"}]'",
          "after[0].on_failure must be one of fail, run, skip");
  refused("after => '[{\"id\": " + id(a) + ", \"then\": 1}]'", "after[0] may have only");
  refused("after => '[" + id(a) + "]', on_parent_failure => 'retry'",
          "on_parent_failure must be one of fail, run, skip");
  refused("on_parent_failure => 'run'", "on_parent_failure goes with after");
  auto batch = db.error_of(
      "SELECT * FROM taskmill.submit_batch('{T,T}', '{x,y}', NULL, NULL, NULL, NULL, NULL, NULL, "
      "NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, ARRAY[NULL, '[" +
      id(a) + ", 424242]']::jsonb[])");
  BOOST_CHECK_MESSAGE(contains(batch, "tasks[1].after[1]: no task 424242"), batch);
  BOOST_CHECK_EQUAL(count_tasks(db), before);
}

BOOST_AUTO_TEST_CASE(a_batch_submits_children_beside_other_tasks) {
  task_database db{"after_batch"};
  auto a = db.call("submit('EXTRACT', 'a')");
  auto res = db.exec(
      "SELECT ordinal, id, execute_at = 'infinity' AS waits FROM taskmill.submit_batch('{T,T}', "
      "'{x,y}', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, "
      "NULL, "
      "ARRAY['[" +
      id(a) + "]', NULL]::jsonb[]) ORDER BY ordinal");
  BOOST_REQUIRE_EQUAL(res.rows(), 2);
  BOOST_CHECK_EQUAL(res.string(0, 2), "t");
  BOOST_CHECK_EQUAL(res.string(1, 2), "f");
}

BOOST_AUTO_TEST_CASE(purging_a_finished_graph_takes_its_edges) {
  task_database db{"after_purge"};
  auto p = db.call("submit('EXTRACT', 'p')");
  auto c = db.call("submit('T', 'c', after => '[" + id(p) + "]')");
  finish(db, p, "fail");
  BOOST_CHECK_EQUAL(db.by_id(c.id).status, "cancelled");
  db.exec("UPDATE taskmill.tasks SET updated_at = now() - interval '2 days'");
  auto term = db.seize_lead();
  db.scalar("SELECT taskmill.sweep_purge(3600000, 100, " + term + ")");
  BOOST_CHECK_EQUAL(count_tasks(db), "0/0/0");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(races)

namespace {

/// Waits until `n` sessions of the database wait for a lock.
void await_lock_waits(const task_database& db, int n) {
  BOOST_REQUIRE(test::eventually([&] {
    return db.scalar(
               "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
               "AND wait_event_type = 'Lock'") == std::to_string(n);
  }));
}

}  // namespace

// Each order of a parent's outcome and a child's submit, both in flight at
// once: the child ends due either way.
BOOST_AUTO_TEST_CASE(a_child_submitted_while_its_parents_outcome_is_in_flight_is_due_after_it) {
  task_database db{"race_in_flight"};
  // The outcome first: the submit waits for it and finds the parent done.
  auto p = db.call("submit('EXTRACT', 'p')");
  auto attempt = run(db, p);
  auto finisher = db.connect();
  BOOST_REQUIRE(finisher.exec("BEGIN"));
  BOOST_REQUIRE(finisher.exec(complete_sql(p.id, attempt)));
  auto submitter = db.connect();
  auto child = std::async(std::launch::async, [&] {
    return task_database::call_on(submitter, "submit('T', 'c', after => '[" + id(p) + "]')");
  });
  await_lock_waits(db, 1);
  BOOST_REQUIRE(finisher.exec("COMMIT"));
  auto c = child.get();
  BOOST_CHECK_LE(db.by_id(c.id).execute_in_s, 0.0);
  // The submit first: the outcome waits for it and finds the child.
  auto q = db.call("submit('EXTRACT', 'q')");
  attempt = run(db, q);
  BOOST_REQUIRE(submitter.exec("BEGIN"));
  auto d = task_database::call_on(submitter, "submit('T', 'd', after => '[" + id(q) + "]')");
  auto done = std::async(std::launch::async, [&] {
    return static_cast<bool>(finisher.exec(complete_sql(q.id, attempt)));
  });
  await_lock_waits(db, 1);
  BOOST_REQUIRE(submitter.exec("COMMIT"));
  BOOST_CHECK(done.get());
  BOOST_CHECK_LE(db.by_id(d.id).execute_in_s, 0.0);
}

// A parent finishing while a child of it is submitted: whichever commits
// first, the child is never left waiting for a parent that is done.
BOOST_AUTO_TEST_CASE(a_parent_finishing_while_its_child_is_submitted_never_strands_it) {
  task_database db{"race_submit"};
  constexpr int rounds = 100;
  auto submitter = db.connect();
  auto finisher = db.connect();
  std::vector<int64_t> children;
  for (int i = 0; i < rounds; ++i) {
    auto p = db.call("submit('EXTRACT', 'p" + std::to_string(i) + "')");
    auto attempt = run(db, p);
    std::latch start{2};
    auto child = std::async(std::launch::async, [&] {
      start.arrive_and_wait();
      return task_database::call_on(
          submitter, "submit('T', 'c" + std::to_string(i) + "', after => '[" + id(p) + "]')");
    });
    auto done = std::async(std::launch::async, [&] {
      start.arrive_and_wait();
      return finisher.exec(complete_sql(p.id, attempt));
    });
    children.push_back(child.get().id);
    BOOST_REQUIRE(done.get());
  }
  BOOST_CHECK_EQUAL(db.scalar("SELECT count(*) FROM taskmill.tasks WHERE type = 'T' AND "
                              "(status <> 'pending' OR execute_at > now())"),
                    "0");
  BOOST_CHECK_EQUAL(db.scalar("SELECT count(*) FROM taskmill.task_waits"), "0");
  BOOST_CHECK_EQUAL(children.size(), static_cast<size_t>(rounds));
}

// A child submitted while its running parent is rescheduled: the copy the
// reschedule makes is the one it waits for, and its finish releases it.
BOOST_AUTO_TEST_CASE(a_child_submitted_while_its_parent_is_rescheduled_waits_for_the_copy) {
  task_database db{"race_reschedule"};
  auto p = db.call("submit('EXTRACT', 'p')");
  run(db, p);
  auto submitter = db.connect();
  BOOST_REQUIRE(submitter.exec("BEGIN"));
  auto c = task_database::call_on(submitter, "submit('T', 'c', after => '[" + id(p) + "]')");
  auto rescheduler = db.connect();
  auto copy = std::async(std::launch::async, [&] {
    return task_database::call_on(rescheduler, "reschedule('EXTRACT', 'p', now())");
  });
  await_lock_waits(db, 1);
  BOOST_REQUIRE(submitter.exec("COMMIT"));
  auto recreated = copy.get();
  BOOST_REQUIRE_EQUAL(recreated.outcome, "recreated");
  BOOST_CHECK(waits(db.by_id(c.id)));
  finish(db, recreated, "succeeded");
  BOOST_CHECK_LE(db.by_id(c.id).execute_in_s, 0.0);
}

// Parents of one child finishing at once in separate transactions: each
// finish counts once, and the child becomes due once, when the last commits.
BOOST_AUTO_TEST_CASE(parents_finishing_together_on_several_connections_release_the_child_once) {
  task_database db{"race_fan_in"};
  constexpr int rounds = 40;
  constexpr int parents = 4;
  std::vector<db::connection> conns;
  for (int k = 0; k < parents; ++k) conns.push_back(db.connect());
  for (int i = 0; i < rounds; ++i) {
    std::vector<task_row> ps;
    std::string after = "[";
    for (int k = 0; k < parents; ++k) {
      ps.push_back(
          db.call("submit('EXTRACT', 'r" + std::to_string(i) + "_" + std::to_string(k) + "')"));
      after += (k ? "," : "") + id(ps.back());
    }
    auto c = db.call("submit('T', 'c" + std::to_string(i) + "', after => '" + after + "]')");
    db.exec("UPDATE taskmill.tasks SET priority = 1 WHERE type = 'EXTRACT' AND status = 'pending'");
    auto claimed = db.claim(parents);
    BOOST_REQUIRE_EQUAL(claimed.size(), static_cast<size_t>(parents));
    std::latch start{parents};
    std::vector<std::future<bool>> done;
    for (int k = 0; k < parents; ++k)
      done.push_back(std::async(std::launch::async, [&, k] {
        start.arrive_and_wait();
        return static_cast<bool>(conns[k].exec(complete_sql(claimed[k].id, claimed[k].attempt)));
      }));
    for (auto& d : done) BOOST_REQUIRE(d.get());
    auto child = db.by_id(c.id);
    BOOST_REQUIRE_MESSAGE(!waits(child), "round " << i << ": the child still waits");
    auto claimed_child = db.claim(10);
    BOOST_REQUIRE_EQUAL(claimed_child.size(), 1u);
    BOOST_CHECK_EQUAL(claimed_child[0].id, c.id);
    BOOST_REQUIRE(db.complete(c.id, claimed_child[0].attempt, "succeeded"));
  }
  BOOST_CHECK_EQUAL(db.scalar("SELECT count(*) FROM taskmill.task_edges WHERE NOT done"), "0");
  BOOST_CHECK_EQUAL(db.scalar("SELECT count(*) FROM taskmill.task_waits"), "0");
}

BOOST_AUTO_TEST_SUITE_END()

namespace {

/// A node that runs NOOP tasks, and its HTTP API.
struct node_fixture : test::nodes_fixture {
  node_fixture() : nodes_fixture("workflow_api") {
    base = api_url(start(test::test_node_config("workflow-node")));
  }

  json call(const std::string& method, const std::string& path, const std::string& body = {}) {
    auto res = http_fetch(method, base + path, body, {});
    BOOST_REQUIRE_MESSAGE(res, test::describe(res));
    last_status = res->status;
    return json::parse(res->body, nullptr, false);
  }

  json task(int64_t id) { return call("GET", "/v1/tasks/" + std::to_string(id)); }

  std::string base;
  int last_status = 0;
};

}  // namespace

BOOST_FIXTURE_TEST_SUITE(api, node_fixture)

// Through a node: a child waits, says for whom, and runs once its parent
// succeeded; a child of a parent cancelled is cancelled with it.
BOOST_AUTO_TEST_CASE(children_wait_for_their_parents_through_the_api) {
  auto held = call("POST", "/v1/tasks", R"({"type": "NOBODY_RUNS_THIS", "key": "p"})");
  auto held_id = held["task"]["id"].get<int64_t>();
  auto child =
      call("POST", "/v1/tasks",
           R"({"type": "NOOP", "key": "c", "after": [{"type": "NOBODY_RUNS_THIS", "key": "p"}]})");
  BOOST_REQUIRE_EQUAL(last_status, 200);
  auto child_id = child["task"]["id"].get<int64_t>();
  BOOST_CHECK(child["task"]["execute_at"].is_null());
  auto waiting = task(child_id)["waiting"];
  BOOST_CHECK_EQUAL(waiting["reason"], "waiting_for_parents");
  BOOST_CHECK_EQUAL(waiting["parents"], json::array({held_id}));
  BOOST_CHECK_EQUAL(task(child_id)["parents"], json::array({held_id}));
  BOOST_CHECK_EQUAL(task(held_id)["children"], json::array({child_id}));
  BOOST_CHECK(!task(held_id).contains("parents"));
  call("POST", "/v1/tasks/cancel", R"({"id": )" + std::to_string(held_id) + "}");
  BOOST_CHECK_EQUAL(task(child_id)["status"], "cancelled");

  auto parent = call("POST", "/v1/tasks", R"({"type": "NOOP", "key": "p2"})");
  auto parent_id = parent["task"]["id"].get<int64_t>();
  auto second = call("POST", "/v1/tasks",
                     R"({"tasks": [{"type": "NOOP", "key": "c2", "after": [)" +
                         std::to_string(parent_id) + R"(]}]})");
  auto second_id = second["results"][0]["task"]["id"].get<int64_t>();
  BOOST_REQUIRE(test::eventually([&] { return task(second_id)["status"] == "succeeded"; }));
  BOOST_CHECK_EQUAL(task(parent_id)["status"], "succeeded");
}

BOOST_AUTO_TEST_CASE(bad_parents_are_400_naming_the_field) {
  auto before = db.scalar("SELECT count(*) FROM taskmill.tasks");
  auto refused = call("POST", "/v1/tasks", R"({"type": "NOOP", "key": "c", "after": [99999]})");
  BOOST_CHECK_EQUAL(last_status, 400);
  BOOST_CHECK_EQUAL(refused["error"]["message"], "after[0]: no task 99999");
  refused = call(
      "POST", "/v1/tasks",
      R"({"tasks": [{"type": "NOOP", "key": "a"}, {"type": "NOOP", "key": "c", "after": "x"}]})");
  BOOST_CHECK_EQUAL(last_status, 400);
  BOOST_CHECK_EQUAL(
      refused["error"]["message"],
      "tasks[1].after must be an array of task ids or {\"type\", \"key\"} references");
  refused = call("POST", "/v1/tasks",
                 R"({"type": "NOOP", "key": "c", "after": [], "on_parent_failure": 3})");
  BOOST_CHECK_EQUAL(last_status, 400);
  BOOST_CHECK_EQUAL(db.scalar("SELECT count(*) FROM taskmill.tasks"), before);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(crashes)

// The node running a parent is killed: the child waits through the lost
// attempt and the retry, and runs once, after the parent's success.
BOOST_AUTO_TEST_CASE(a_child_waits_for_the_retry_of_a_parent_whose_node_was_killed) {
  task_database db{"crash_parent"};
  test::scripted_executor executor;
  std::vector<std::string> options{"heartbeat.interval=200ms", "heartbeat.missed=5",
                                   "watcher.interval=200ms",   "scheduling.poll_interval=200ms",
                                   "node.log_level=warn",      "types.SLOW.executor=http",
                                   "types.SLOW.timeout=20s",   "types.NOOP.executor=noop"};
  options.push_back("types.SLOW.url=" + executor.url());
  auto binary = std::getenv("TASKMILL_BINARY");
  BOOST_REQUIRE_MESSAGE(binary, "TASKMILL_BINARY is not set: run the tests through ctest");
  std::map<std::string, std::unique_ptr<node_process>> nodes;
  for (const auto* name : {"n1", "n2"})
    nodes[name] = std::make_unique<node_process>(binary, name, db.conninfo(), options);
  auto parent = db.call(
      "submit('SLOW', 'p', payload => '{\"delay_ms\": 1500}', "
      "backoff_kind => 'fixed', backoff_base_ms => 10)");
  auto child = db.call("submit('NOOP', 'c', after => '[" + id(parent) + "]')");
  std::string holder;
  BOOST_REQUIRE(test::eventually(
      [&] {
        auto p = db.by_id(parent.id);
        holder = p.picked_by;
        return p.status == "running" && nodes.count(holder) > 0;
      },
      30s));
  nodes.at(holder)->kill_hard();
  BOOST_CHECK(waits(db.by_id(child.id)));
  BOOST_REQUIRE_MESSAGE(
      test::eventually([&] { return db.by_id(child.id).status == "succeeded"; }, 60s),
      test::later{[&](std::ostream& out) {
        for (const auto& [name, n] : nodes)
          if (name != holder) out << n->log_tail();
      }});
  auto p = db.by_id(parent.id);
  BOOST_CHECK_EQUAL(p.status, "succeeded");
  BOOST_CHECK_EQUAL(p.attempt, 2);
  BOOST_CHECK_EQUAL(db.scalar("SELECT string_agg(outcome, ',' ORDER BY attempt) FROM "
                              "taskmill.attempt_history WHERE task_id = $1",
                              {id(parent)}),
                    "lost,succeeded");
  BOOST_CHECK_EQUAL(db.by_id(child.id).attempt, 1);
  BOOST_CHECK_EQUAL(db.scalar("SELECT c.started_at >= p.finished_at FROM taskmill.tasks c, "
                              "taskmill.tasks p WHERE c.id = $1 AND p.id = $2",
                              {id(child), id(parent)}),
                    "t");
}

BOOST_AUTO_TEST_SUITE_END()
