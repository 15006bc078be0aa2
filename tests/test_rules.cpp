// SPEC §3, every rule, against the SQL functions the nodes and business
// services share: submit, reschedule, cancel.
#define BOOST_TEST_MODULE rules
#include <boost/test/unit_test.hpp>

#include "messages/errors.hpp"
#include "tests/support/task_sql.hpp"

#include <future>
#include <thread>

using namespace taskmill;
using test::task_database;
using test::task_row;

namespace {

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

/// Moves (type, key)'s current task into `status` the way the system would.
void make_status(const task_database& db, const task_row& t, const std::string& status) {
  if (status == "pending") return;
  db.exec("UPDATE taskmill.tasks SET execute_at = now() - interval '1 hour' WHERE id = $1",
          {std::to_string(t.id)});
  db.exec("UPDATE taskmill.tasks SET priority = 1 WHERE id = $1", {std::to_string(t.id)});
  auto claimed = db.claim(1);
  BOOST_REQUIRE_EQUAL(claimed.size(), 1u);
  BOOST_REQUIRE_EQUAL(claimed[0].id, t.id);
  if (status == "running") return;
  if (status == "succeeded" || status == "stopped") {
    BOOST_REQUIRE(db.complete(t.id, claimed[0].attempt, "succeeded"));
    if (status == "stopped")
      db.exec("UPDATE taskmill.tasks SET status = 'stopped' WHERE id = $1", {std::to_string(t.id)});
  } else if (status == "failed") {
    BOOST_REQUIRE(db.complete(t.id, claimed[0].attempt, "retry", "boom"));
  } else if (status == "dead") {
    BOOST_REQUIRE(db.complete(t.id, claimed[0].attempt, "fail", "broken"));
  }
  BOOST_REQUIRE_EQUAL(db.by_id(t.id).status, status);
}

/// Runs `body` on its own connection while `holder` keeps a claim of
/// (type, key) uncommitted; commits the claim once `body` waits on the lock.
template <class Body>
task_row while_claim_in_flight(const task_database& db, Body body) {
  auto holder = db.connect();
  BOOST_REQUIRE(holder.exec("BEGIN"));
  auto claimed = holder.exec(
      "SELECT id FROM taskmill.claim('holder', 1, '{}', '{}', '{}', 0, NULL, NULL, NULL)");
  BOOST_REQUIRE(claimed && claimed->rows() == 1);
  auto result = std::async(std::launch::async, body);
  // Commit only once the other transaction is blocked on the claimed row.
  BOOST_REQUIRE(test::eventually([&] {
    return db.scalar(
               "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
               "AND wait_event_type = 'Lock'") == "1";
  }));
  BOOST_REQUIRE(holder.exec("COMMIT"));
  return result.get();
}

}  // namespace

BOOST_AUTO_TEST_SUITE(submit)

BOOST_AUTO_TEST_CASE(a_new_unit_is_created) {
  task_database db{"submit"};
  auto t = db.call("submit('ARTICLE_AUDIT', '42')");
  BOOST_CHECK_EQUAL(t.outcome, "created");
  BOOST_CHECK_EQUAL(t.version, 0);
  BOOST_CHECK_EQUAL(t.status, "pending");
  BOOST_CHECK_EQUAL(t.priority, 3);
  BOOST_CHECK_EQUAL(t.payload, "{}");
  BOOST_CHECK_EQUAL(t.attempt, 0);
  BOOST_CHECK_EQUAL(t.retry_count, 0);
  BOOST_CHECK_EQUAL(t.max_retries, 3);
  BOOST_CHECK_EQUAL(t.timeout_ms, 5000);
  BOOST_CHECK_EQUAL(t.trace_id.size(), 32u);
  BOOST_CHECK_LE(std::abs(t.execute_in_s), 1.0);
}

// Tasks submitted without a trace id get one that the API would accept if
// given (32 lowercase hex digits, not all zero), different for each task.
BOOST_AUTO_TEST_CASE(generated_trace_ids_are_valid_and_do_not_repeat) {
  task_database db{"traces"};
  db.exec(
      "SELECT count(*) FROM taskmill.submit_batch(array_fill('T'::text, ARRAY[20000]), "
      "ARRAY(SELECT 'k' || g FROM generate_series(1, 20000) g), NULL, NULL, NULL, NULL, NULL, "
      "NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)");
  db.exec("SELECT taskmill.submit('T', 'one by one')");
  BOOST_CHECK_EQUAL(
      db.scalar("SELECT concat_ws(' ', count(*), count(DISTINCT trace_id), count(*) FILTER ("
                "WHERE taskmill.task_problem(type, key, NULL, NULL, NULL, NULL, NULL, NULL, "
                "NULL, NULL, NULL, NULL, trace_id, NULL, NULL) IS NULL)) FROM taskmill.tasks"),
      "20001 20001 20001");
}

BOOST_AUTO_TEST_CASE(a_lower_version_is_stale_and_changes_nothing) {
  task_database db{"stale"};
  auto v2 = db.call("submit('T', 'k', 2, '{\"v\": 2}')");
  auto v1 = db.call("submit('T', 'k', 1, '{\"v\": 1}')");
  BOOST_CHECK_EQUAL(v1.outcome, "stale");
  BOOST_CHECK_EQUAL(v1.id, v2.id);
  BOOST_CHECK_EQUAL(v1.version, 2);
  auto rows = db.unit("T", "k");
  BOOST_REQUIRE_EQUAL(rows.size(), 1u);
  BOOST_CHECK_EQUAL(rows[0].payload, "{\"v\": 2}");
}

BOOST_AUTO_TEST_CASE(the_same_version_running_or_succeeded_is_a_duplicate) {
  for (std::string status : {"running", "succeeded"}) {
    task_database db{"dup"};
    auto first = db.call("submit('T', 'k', 1, '{\"n\": 1}')");
    make_status(db, first, status);
    auto again = db.call("submit('T', 'k', 1, '{\"n\": 2}', priority => 1)");
    BOOST_CHECK_EQUAL(again.outcome, "duplicate");
    BOOST_CHECK_EQUAL(again.id, first.id);
    auto rows = db.unit("T", "k");
    BOOST_REQUIRE_EQUAL(rows.size(), 1u);
    BOOST_CHECK_EQUAL(rows[0].status, status);
    BOOST_CHECK_EQUAL(rows[0].payload, "{\"n\": 1}");
  }
}

BOOST_AUTO_TEST_CASE(the_same_version_not_yet_run_or_finished_badly_is_replaced) {
  for (std::string status : {"pending", "failed", "dead", "stopped"}) {
    BOOST_TEST_CONTEXT("status " << status) {
      task_database db{"repl"};
      auto first = db.call("submit('T', 'k', 1, '{\"n\": 1}')");
      make_status(db, first, status);
      auto before = db.by_id(first.id);
      auto again = db.call(
          "submit('T', 'k', 1, '{\"n\": 2}', execute_at => now() + interval '1 hour', "
          "priority => 2, max_retries => 9, timeout_ms => 700, batch => 'b7')");
      BOOST_CHECK_EQUAL(again.outcome, "replaced");
      BOOST_CHECK_EQUAL(again.id, first.id);
      BOOST_CHECK_EQUAL(again.status, "pending");
      BOOST_CHECK_EQUAL(again.payload, "{\"n\": 2}");
      BOOST_CHECK_EQUAL(again.priority, 2);
      BOOST_CHECK_EQUAL(again.max_retries, 9);
      BOOST_CHECK_EQUAL(again.timeout_ms, 700);
      BOOST_CHECK_EQUAL(again.batch, "b7");
      BOOST_CHECK_EQUAL(again.retry_count, 0);
      BOOST_CHECK_GT(again.execute_in_s, 3500);
      // The fencing token never goes back.
      BOOST_CHECK_EQUAL(again.attempt, before.attempt);
      BOOST_CHECK_EQUAL(db.unit("T", "k").size(), 1u);
    }
  }
}

BOOST_AUTO_TEST_CASE(a_higher_version_supersedes_lower_ones_that_have_not_run) {
  for (std::string status : {"pending", "failed"}) {
    task_database db{"super"};
    auto v1 = db.call("submit('T', 'k', 1)");
    make_status(db, v1, status);
    auto v2 = db.call("submit('T', 'k', 2, '{\"v\": 2}')");
    BOOST_CHECK_EQUAL(v2.outcome, "created");
    BOOST_CHECK_NE(v2.id, v1.id);
    auto old = db.by_id(v1.id);
    BOOST_CHECK_EQUAL(old.status, "cancelled");
    BOOST_CHECK_EQUAL(old.error, "superseded by version 2");
  }
}

BOOST_AUTO_TEST_CASE(a_lower_version_that_runs_runs_on) {
  task_database db{"runs"};
  auto v1 = db.call("submit('T', 'k', 1)");
  make_status(db, v1, "running");
  auto v2 = db.call("submit('T', 'k', 2)");
  BOOST_CHECK_EQUAL(v2.outcome, "created");
  BOOST_CHECK_EQUAL(db.by_id(v1.id).status, "running");
  // Its outcome still counts.
  BOOST_CHECK(db.complete(v1.id, 1, "succeeded"));
  BOOST_CHECK_EQUAL(db.by_id(v1.id).status, "succeeded");
  BOOST_CHECK_EQUAL(db.by_id(v2.id).status, "pending");
}

BOOST_AUTO_TEST_CASE(defaults_come_from_the_type_settings) {
  task_database db{"defaults"};
  db.exec(
      "SELECT taskmill.put_type_settings(ARRAY['', 'SLOW'], ARRAY[1111, 2222], ARRAY[4, 8], "
      "ARRAY['exponential', 'fixed'], ARRAY[10, 20], ARRAY[1000, 2000], ARRAY[0.5, 0]::real[], "
      "ARRAY[NULL, 60000]::bigint[], ARRAY[NULL, 5])");
  auto slow = db.call("submit('SLOW', 'k')");
  BOOST_CHECK_EQUAL(slow.timeout_ms, 2222);
  BOOST_CHECK_EQUAL(slow.max_retries, 8);
  auto other = db.call("submit('OTHER', 'k')");
  BOOST_CHECK_EQUAL(other.timeout_ms, 1111);
  BOOST_CHECK_EQUAL(other.max_retries, 4);
  BOOST_CHECK_EQUAL(
      db.scalar("SELECT backoff_kind || backoff_base_ms || '/' || "
                "(deadline_at - execute_at)::text FROM taskmill.tasks WHERE type = 'SLOW'"),
      "fixed20/00:01:00");
  BOOST_CHECK_EQUAL(
      db.scalar("SELECT deadline_at IS NULL FROM taskmill.tasks WHERE type = 'OTHER'"), "t");
  // A request's own options win over the defaults.
  auto own = db.call("submit('SLOW', 'k2', timeout_ms => 5, max_retries => 0)");
  BOOST_CHECK_EQUAL(own.timeout_ms, 5);
  BOOST_CHECK_EQUAL(own.max_retries, 0);
  // A max timeout below the timeout, or a heartbeat timeout of 0, is refused
  // naming the type and the field; nothing changes.
  auto put_sql = [&](const std::string& heartbeat, const std::string& max) {
    return "SELECT taskmill.put_type_settings(ARRAY['SLOW'], ARRAY[2222], ARRAY[8], "
           "ARRAY['fixed'], ARRAY[20], ARRAY[2000], ARRAY[0]::real[], ARRAY[NULL]::bigint[], "
           "ARRAY[5], ARRAY[" +
           heartbeat + "]::bigint[], ARRAY[" + max + "]::int[])";
  };
  auto put = [&](const std::string& heartbeat, const std::string& max) {
    return db.error_of(put_sql(heartbeat, max));
  };
  BOOST_CHECK(contains(put("NULL", "1000"), "task type \"SLOW\": max_timeout must be at least"));
  BOOST_CHECK(contains(put("0", "NULL"), "heartbeat_timeout must be positive"));
  db.exec(put_sql("500", "9000"));
  BOOST_CHECK_EQUAL(db.scalar("SELECT heartbeat_timeout_ms || '/' || max_timeout_ms "
                              "FROM taskmill.task_types WHERE type = 'SLOW'"),
                    "500/9000");
}

BOOST_AUTO_TEST_CASE(bad_arguments_are_refused_naming_the_field) {
  task_database db{"badarg"};
  BOOST_CHECK(contains(db.error_of("SELECT taskmill.submit('T', 'k', priority => 9)"), "priority"));
  BOOST_CHECK(contains(db.error_of("SELECT taskmill.submit('', 'k')"), "type"));
  BOOST_CHECK(contains(db.error_of("SELECT taskmill.submit('T', repeat('k', 501))"), "key"));
  BOOST_CHECK(contains(db.error_of("SELECT taskmill.submit('T', 'k', -1)"), "version"));
  BOOST_CHECK(
      contains(db.error_of("SELECT taskmill.submit('T', 'k', max_retries => -1)"), "max_retries"));
  BOOST_CHECK(
      contains(db.error_of("SELECT taskmill.submit('T', 'k', timeout_ms => 0)"), "timeout_ms"));
  BOOST_CHECK(contains(db.error_of("SELECT taskmill.submit('T', 'k', backoff_kind => 'linear')"),
                       "backoff"));
  BOOST_CHECK(
      contains(db.error_of("SELECT taskmill.submit('T', 'k', shard_index => 1)"), "shard_index"));
  BOOST_CHECK(contains(db.error_of("SELECT taskmill.reschedule('T', 'k', NULL)"), "execute_at"));
  BOOST_CHECK_EQUAL(db.scalar("SELECT count(*) FROM taskmill.tasks"), "0");
}

BOOST_AUTO_TEST_CASE(a_replace_that_loses_the_race_to_a_claim_decides_again) {
  task_database db{"replrace"};
  auto first = db.call("submit('T', 'k', 1, '{\"n\": 1}', execute_at => now() - interval '1 s')");
  auto conn = db.connect();
  auto raced = while_claim_in_flight(
      db, [&] { return task_database::call_on(conn, "submit('T', 'k', 1, '{\"n\": 2}')"); });
  // It read the task pending, found it running when writing: a duplicate.
  BOOST_CHECK_EQUAL(raced.outcome, "duplicate");
  BOOST_CHECK_EQUAL(raced.status, "running");
  BOOST_CHECK_EQUAL(db.by_id(first.id).payload, "{\"n\": 1}");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(reschedule)

BOOST_AUTO_TEST_CASE(pending_and_failed_move_in_place) {
  for (std::string status : {"pending", "failed"}) {
    task_database db{"resch"};
    auto t = db.call("submit('T', 'k', 0, '{\"a\": 1}')");
    make_status(db, t, status);
    auto moved = db.call("reschedule('T', 'k', now() + interval '2 hours')");
    BOOST_CHECK_EQUAL(moved.outcome, "updated");
    BOOST_CHECK_EQUAL(moved.id, t.id);
    BOOST_CHECK_EQUAL(moved.status, status);
    BOOST_CHECK_GT(moved.execute_in_s, 7100);
    BOOST_CHECK_EQUAL(moved.payload, "{\"a\": 1}");
    BOOST_CHECK_EQUAL(db.unit("T", "k").size(), 1u);
  }
}

BOOST_AUTO_TEST_CASE(a_new_payload_comes_with_the_move) {
  task_database db{"reschpay"};
  db.call("submit('T', 'k', 0, '{\"a\": 1}')");
  auto moved = db.call("reschedule('T', 'k', now(), '{\"a\": 2}')");
  BOOST_CHECK_EQUAL(moved.payload, "{\"a\": 2}");
}

BOOST_AUTO_TEST_CASE(running_is_cancelled_and_recreated) {
  task_database db{"reschrun"};
  auto t = db.call("submit('T', 'k', 3, '{\"a\": 1}', max_retries => 7)");
  make_status(db, t, "running");
  auto again = db.call("reschedule('T', 'k', now() + interval '1 hour')");
  BOOST_CHECK_EQUAL(again.outcome, "recreated");
  BOOST_CHECK_NE(again.id, t.id);
  BOOST_CHECK_EQUAL(again.version, 3);
  BOOST_CHECK_EQUAL(again.payload, "{\"a\": 1}");
  BOOST_CHECK_EQUAL(again.max_retries, 7);
  BOOST_CHECK_EQUAL(again.status, "pending");
  BOOST_CHECK_EQUAL(again.attempt, 0);
  BOOST_CHECK_GT(again.execute_in_s, 3500);
  auto old = db.by_id(t.id);
  BOOST_CHECK_EQUAL(old.status, "cancelled");
  BOOST_CHECK(contains(old.error, "rescheduled"));
  // The old execution may still finish: recorded, and nothing changes.
  BOOST_CHECK(!db.complete(t.id, 1, "succeeded"));
  BOOST_CHECK_EQUAL(db.by_id(t.id).status, "cancelled");
  BOOST_CHECK_EQUAL(db.by_id(again.id).status, "pending");
  BOOST_CHECK_EQUAL(db.scalar("SELECT outcome FROM taskmill.attempt_history WHERE task_id = $1",
                              {std::to_string(t.id)}),
                    "succeeded");
}

BOOST_AUTO_TEST_CASE(finished_work_is_ignored) {
  for (std::string status : {"succeeded", "stopped"}) {
    task_database db{"reschign"};
    auto t = db.call("submit('T', 'k')");
    make_status(db, t, status);
    auto same = db.call("reschedule('T', 'k', now() + interval '1 hour')");
    BOOST_CHECK_EQUAL(same.outcome, "ignored");
    BOOST_CHECK_EQUAL(same.id, t.id);
    BOOST_CHECK_EQUAL(db.by_id(t.id).status, status);
    BOOST_CHECK_EQUAL(db.unit("T", "k").size(), 1u);
  }
}

BOOST_AUTO_TEST_CASE(dead_is_rearmed) {
  task_database db{"reschdead"};
  auto t = db.call("submit('T', 'k')");
  make_status(db, t, "dead");
  BOOST_REQUIRE_EQUAL(db.by_id(t.id).retry_count, 1);
  auto rearmed = db.call("reschedule('T', 'k', now() + interval '5 minutes')");
  BOOST_CHECK_EQUAL(rearmed.outcome, "updated");
  BOOST_CHECK_EQUAL(rearmed.id, t.id);
  BOOST_CHECK_EQUAL(rearmed.status, "pending");
  BOOST_CHECK_EQUAL(rearmed.retry_count, 0);
  BOOST_CHECK_GT(rearmed.execute_in_s, 250);
}

BOOST_AUTO_TEST_CASE(nothing_there_creates_a_task) {
  task_database db{"reschnew"};
  auto t = db.call("reschedule('T', 'k', now() + interval '1 minute', '{\"p\": 1}')");
  BOOST_CHECK_EQUAL(t.outcome, "created");
  BOOST_CHECK_EQUAL(t.payload, "{\"p\": 1}");
  BOOST_CHECK_EQUAL(t.status, "pending");
  auto bare = db.call("reschedule('T', 'k2', now())");
  BOOST_CHECK_EQUAL(bare.payload, "{}");
}

BOOST_AUTO_TEST_CASE(only_cancelled_tasks_lend_their_payload) {
  task_database db{"reschcanc"};
  auto t = db.call("submit('T', 'k', 4, '{\"from\": \"cancelled\"}', priority => 1)");
  db.call("cancel('T', 'k')");
  auto again = db.call("reschedule('T', 'k', now() + interval '1 minute')");
  BOOST_CHECK_EQUAL(again.outcome, "created");
  BOOST_CHECK_NE(again.id, t.id);
  BOOST_CHECK_EQUAL(again.payload, "{\"from\": \"cancelled\"}");
  BOOST_CHECK_EQUAL(again.version, 4);
  BOOST_CHECK_EQUAL(again.priority, 1);
  auto own = db.call("reschedule('T', 'k', now(), '{\"own\": true}')");
  BOOST_CHECK_EQUAL(own.outcome, "updated");
  BOOST_CHECK_EQUAL(own.payload, "{\"own\": true}");
}

BOOST_AUTO_TEST_CASE(an_update_that_touches_no_row_decides_again) {
  task_database db{"reschrace"};
  auto t = db.call("submit('T', 'k', 0, '{}', execute_at => now() - interval '1 s')");
  auto conn = db.connect();
  auto raced = while_claim_in_flight(db, [&] {
    return task_database::call_on(conn, "reschedule('T', 'k', now() + interval '1 hour')");
  });
  // Read pending, found running when writing: the change is not dropped.
  BOOST_CHECK_EQUAL(raced.outcome, "recreated");
  BOOST_CHECK_EQUAL(db.by_id(t.id).status, "cancelled");
  BOOST_CHECK_EQUAL(raced.status, "pending");
  BOOST_CHECK_GT(raced.execute_in_s, 3500);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(cancel)

BOOST_AUTO_TEST_CASE(waiting_and_running_tasks_are_cancelled) {
  for (std::string status : {"pending", "failed", "running"}) {
    task_database db{"cancel"};
    auto t = db.call("submit('T', 'k')");
    make_status(db, t, status);
    auto by_id = db.call("cancel(" + std::to_string(t.id) + "::bigint)");
    BOOST_CHECK_EQUAL(by_id.outcome, "cancelled");
    BOOST_CHECK_EQUAL(by_id.status, "cancelled");
    if (status == "running") {
      // Its execution may still finish; the outcome is stale.
      BOOST_CHECK(!db.complete(t.id, 1, "succeeded"));
      BOOST_CHECK_EQUAL(db.by_id(t.id).status, "cancelled");
    }
  }
}

BOOST_AUTO_TEST_CASE(finished_tasks_are_unchanged) {
  for (std::string status : {"succeeded", "dead", "stopped"}) {
    task_database db{"cancelfin"};
    auto t = db.call("submit('T', 'k')");
    make_status(db, t, status);
    auto same = db.call("cancel('T', 'k')");
    BOOST_CHECK_EQUAL(same.outcome, "unchanged");
    BOOST_CHECK_EQUAL(same.status, status);
    auto again = db.call("cancel(" + std::to_string(t.id) + "::bigint)");
    BOOST_CHECK_EQUAL(again.outcome, "unchanged");
  }
}

BOOST_AUTO_TEST_CASE(by_type_and_key_every_live_version_goes) {
  task_database db{"cancelkey"};
  auto v1 = db.call("submit('T', 'k', 1)");
  make_status(db, v1, "running");
  auto v2 = db.call("submit('T', 'k', 2)");
  auto cancelled = db.call("cancel('T', 'k')");
  BOOST_CHECK_EQUAL(cancelled.outcome, "cancelled");
  BOOST_CHECK_EQUAL(cancelled.id, v2.id);
  BOOST_CHECK_EQUAL(db.by_id(v1.id).status, "cancelled");
  BOOST_CHECK_EQUAL(db.by_id(v2.id).status, "cancelled");
  auto again = db.call("cancel('T', 'k')");
  BOOST_CHECK_EQUAL(again.outcome, "unchanged");
}

BOOST_AUTO_TEST_CASE(unknown_tasks_are_not_found) {
  task_database db{"cancelnone"};
  BOOST_CHECK(
      contains(db.error_of("SELECT taskmill.cancel(12345::bigint)"), "no task with id 12345"));
  BOOST_CHECK(contains(db.error_of("SELECT taskmill.cancel('T', 'nope')"),
                       "no task with type T and key nope"));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(retry_by_id)

BOOST_AUTO_TEST_CASE(a_finished_task_runs_again_with_its_retries_counted_afresh) {
  for (std::string status : {"dead", "failed", "succeeded", "stopped"}) {
    task_database db{"retry"};
    auto t = db.call("submit('T', 'k', execute_at => now() + interval '1 hour')");
    make_status(db, t, status);
    db.exec("SELECT taskmill.retry($1::bigint)", {std::to_string(t.id)});
    auto again = db.by_id(t.id);
    BOOST_CHECK_EQUAL(again.status, "pending");
    BOOST_CHECK_EQUAL(again.retry_count, 0);
    BOOST_CHECK_LE(again.execute_in_s, 0.0);
    BOOST_CHECK_EQUAL(db.claim(1).size(), 1u);
  }
}

BOOST_AUTO_TEST_CASE(earlier_successes_stay_in_the_history) {
  task_database db{"retryhist"};
  auto t = db.call("submit('T', 'k', execute_at => now() + interval '1 hour')");
  auto id = std::to_string(t.id);
  make_status(db, t, "succeeded");
  auto history = [&] {
    return db.scalar(
        "SELECT string_agg(attempt || ':' || outcome || ':' || node, ',' ORDER BY attempt) "
        "FROM taskmill.attempt_history WHERE task_id = $1 AND finished_at >= started_at",
        {id});
  };
  BOOST_CHECK_EQUAL(history(), "1:succeeded:n1");
  db.exec("SELECT taskmill.retry($1::bigint)", {id});
  BOOST_CHECK_EQUAL(history(), "1:succeeded:n1");
  // The time of that success is not taken for the next attempt's.
  BOOST_CHECK_EQUAL(db.scalar("SELECT finished_at IS NULL FROM taskmill.tasks WHERE id = $1", {id}),
                    "t");
  auto again = db.claim(1, "n2");
  BOOST_REQUIRE_EQUAL(again.size(), 1u);
  BOOST_REQUIRE(db.complete(t.id, 2, "succeeded"));
  BOOST_CHECK(!db.complete(t.id, 2, "succeeded"));
  BOOST_CHECK(!db.complete(t.id, 2, "fail", "late"));
  BOOST_CHECK_EQUAL(history(), "1:succeeded:n1,2:succeeded:n2");
  // Run again and lost with its node: a failed attempt after two successes.
  db.exec("SELECT taskmill.retry($1::bigint)", {id});
  BOOST_REQUIRE_EQUAL(db.claim(1, "n3").size(), 1u);
  db.exec("SELECT taskmill.lose_attempts(ARRAY[$1::bigint], ARRAY[3], 'lost', 'node died')", {id});
  BOOST_CHECK_EQUAL(history(), "1:succeeded:n1,2:succeeded:n2,3:lost:n3");
}

BOOST_AUTO_TEST_CASE(a_running_task_is_refused) {
  task_database db{"retryrun"};
  auto t = db.call("submit('T', 'k')");
  make_status(db, t, "running");
  BOOST_CHECK(
      contains(db.error_of("SELECT taskmill.retry(" + std::to_string(t.id) + ")"), "is running"));
  BOOST_CHECK_EQUAL(db.by_id(t.id).attempt, 1);
}

BOOST_AUTO_TEST_CASE(a_superseded_version_stays_finished) {
  task_database db{"retrysuper"};
  auto v1 = db.call("submit('T', 'k', 1, execute_at => now() + interval '1 hour')");
  auto v2 = db.call("submit('T', 'k', 2, execute_at => now() + interval '1 hour')");
  BOOST_REQUIRE_EQUAL(db.by_id(v1.id).status, "cancelled");
  BOOST_CHECK(contains(db.error_of("SELECT taskmill.retry(" + std::to_string(v1.id) + ")"),
                       "superseded by version 2"));
  // A lower version that ran on and died is superseded just the same.
  auto w1 = db.call("submit('U', 'k', 1)");
  make_status(db, w1, "running");
  db.call("submit('U', 'k', 2, execute_at => now() + interval '1 hour')");
  BOOST_REQUIRE(db.complete(w1.id, 1, "fail", "broken"));
  BOOST_CHECK(contains(db.error_of("SELECT taskmill.retry(" + std::to_string(w1.id) + ")"),
                       "superseded by version 2"));
  BOOST_CHECK_EQUAL(db.by_id(v1.id).status, "cancelled");
  BOOST_CHECK_EQUAL(db.by_id(w1.id).status, "dead");
  BOOST_CHECK_EQUAL(db.by_id(v2.id).status, "pending");
}

BOOST_AUTO_TEST_CASE(a_version_brought_back_supersedes_lower_ones_not_yet_run) {
  task_database db{"retrylower"};
  db.call("submit('T', 'k', 1, execute_at => now() + interval '1 hour')");
  auto v2 = db.call("submit('T', 'k', 2, execute_at => now() + interval '1 hour')");
  db.exec("SELECT taskmill.cancel($1::bigint)", {std::to_string(v2.id)});
  // With version 2 cancelled, version 1 may be submitted again.
  auto v1 = db.call("submit('T', 'k', 1, execute_at => now() + interval '1 hour')");
  BOOST_REQUIRE_EQUAL(v1.outcome, "created");
  db.exec("SELECT taskmill.retry($1::bigint)", {std::to_string(v2.id)});
  BOOST_CHECK_EQUAL(db.by_id(v2.id).status, "pending");
  auto old = db.by_id(v1.id);
  BOOST_CHECK_EQUAL(old.status, "cancelled");
  BOOST_CHECK_EQUAL(old.error, "superseded by version 2");
  BOOST_CHECK_EQUAL(db.scalar("SELECT (taskmill.current_task('T', 'k')).id"),
                    std::to_string(v2.id));
}

BOOST_AUTO_TEST_CASE(retrying_a_batch_leaves_superseded_versions_alone) {
  task_database db{"retrybatch"};
  auto w1 = db.call("submit('U', 'k', 1, batch => 'B')");
  make_status(db, w1, "dead");
  auto other = db.call("submit('U', 'other', 0, batch => 'B')");
  make_status(db, other, "dead");
  db.call("submit('U', 'k', 2, execute_at => now() + interval '1 hour')");
  BOOST_CHECK_EQUAL(db.scalar("SELECT taskmill.retry_batch('B')"), "1");
  BOOST_CHECK_EQUAL(db.by_id(w1.id).status, "dead");
  BOOST_CHECK_EQUAL(db.by_id(other.id).status, "pending");
}

BOOST_AUTO_TEST_CASE(a_cancelled_task_comes_back_unless_its_version_lives_again) {
  task_database db{"retrycancel"};
  auto t = db.call("submit('T', 'k', execute_at => now() + interval '1 hour')");
  db.call("cancel('T', 'k')");
  db.exec("SELECT taskmill.retry($1::bigint)", {std::to_string(t.id)});
  BOOST_CHECK_EQUAL(db.by_id(t.id).status, "pending");
  db.call("cancel('T', 'k')");
  auto again = db.call("submit('T', 'k', execute_at => now() + interval '1 hour')");
  BOOST_REQUIRE_NE(again.id, t.id);
  BOOST_CHECK(contains(db.error_of("SELECT taskmill.retry(" + std::to_string(t.id) + ")"),
                       "replaced by a live task"));
  BOOST_CHECK_EQUAL(db.by_id(t.id).status, "cancelled");
  BOOST_CHECK(contains(db.error_of("SELECT taskmill.retry(424242)"), "no task with id 424242"));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(transactional_enqueue)

BOOST_AUTO_TEST_CASE(a_business_transaction_submits_atomically_and_wakes_on_commit) {
  task_database db{"txn"};
  db.exec("CREATE TABLE articles (id int PRIMARY KEY, state text)");
  auto listener = db.connect_direct();
  BOOST_REQUIRE(listener.exec("LISTEN taskmill_tasks"));
  auto business = db.connect();
  BOOST_REQUIRE(business.exec("BEGIN"));
  BOOST_REQUIRE(business.exec("INSERT INTO articles VALUES (42, 'pending_review')"));
  BOOST_REQUIRE(business.exec(
      "SELECT taskmill.submit('ARTICLE_AUDIT', '42', payload => '{\"article\": 42}')"));
  // Not visible, no wake-up before the commit.
  BOOST_CHECK_EQUAL(db.scalar("SELECT count(*) FROM taskmill.tasks"), "0");
  BOOST_REQUIRE(!listener.consume_input());
  BOOST_CHECK(listener.take_notifications().empty());
  BOOST_REQUIRE(business.exec("COMMIT"));
  BOOST_CHECK_EQUAL(db.scalar("SELECT count(*) FROM taskmill.tasks"), "1");
  BOOST_CHECK(test::eventually(
      [&] { return !listener.consume_input() && !listener.take_notifications().empty(); }));
  // A rolled back transaction leaves nothing behind.
  BOOST_REQUIRE(business.exec("BEGIN"));
  BOOST_REQUIRE(business.exec("SELECT taskmill.submit('ARTICLE_AUDIT', '43')"));
  BOOST_REQUIRE(business.exec("ROLLBACK"));
  BOOST_CHECK_EQUAL(db.scalar("SELECT count(*) FROM taskmill.tasks"), "1");
}

BOOST_AUTO_TEST_SUITE_END()
