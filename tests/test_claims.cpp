// SPEC §4 against the SQL functions: claims, fenced outcomes, retries and
// backoff, limits, weighted fairness, and races between many connections.
#define BOOST_TEST_MODULE claims
#include <boost/test/unit_test.hpp>

#include "actors/limits/fair_shares.hpp"
#include "messages/errors.hpp"
#include "messages/time.hpp"
#include "storage/hand_off_notice.hpp"
#include "tests/support/claim_races.hpp"
#include "tests/support/task_sql.hpp"

#include <algorithm>
#include <atomic>
#include <functional>
#include <map>
#include <mutex>
#include <numeric>
#include <random>
#include <set>
#include <thread>

using namespace taskmill;
using test::task_database;
using test::task_row;
using namespace taskmill::test::races;

namespace {

std::string claim_sql(const std::string& node, int limit, const std::string& quotas = "{}",
                      const std::string& capped = "{}", const std::string& caps = "{}",
                      int global = 0, const std::string& types = "NULL",
                      const std::string& local_types = "NULL",
                      const std::string& local_room = "NULL") {
  return "SELECT id, type, priority, attempt, key FROM taskmill.claim('" + node + "', " +
         std::to_string(limit) + ", '" + quotas + "', '" + capped + "', '" + caps + "', " +
         std::to_string(global) + ", " + types + ", " + local_types + ", " + local_room + ")";
}

/// A claim after one that took fewer tasks than it had permits for.
std::string after_short_claim_sql(const std::string& node, int limit, const std::string& turns,
                                  int global = 0, const std::string& types = "NULL",
                                  const std::string& capped = "{}",
                                  const std::string& caps = "{}") {
  return "SELECT id, type, priority, attempt, key, turns_taken FROM taskmill.claim_by_turns('" +
         node + "', " + std::to_string(limit) + ", '" + turns + "', '" + capped + "', '" + caps +
         "', " + std::to_string(global) + ", " + types + ", NULL, NULL, true)";
}

void insert_due(const task_database& db, const std::string& type, int priority, int count,
                const std::string& extra_columns = "", const std::string& extra_values = "") {
  db.exec(
      "INSERT INTO taskmill.tasks (type, key, priority, execute_at, trace_id, max_retries, "
      "timeout_ms, backoff_kind, backoff_base_ms, backoff_cap_ms, backoff_jitter" +
      extra_columns + ") SELECT '" + type + "', '" + type + "-" + std::to_string(priority) +
      "-' || g, " + std::to_string(priority) +
      ", now() - interval '1 minute', 't', 3, 5000, 'exponential', 1000, 3600000, 0.1" +
      extra_values + " FROM generate_series(1, " + std::to_string(count) + ") g");
}

/// How many rows of a claim's answer are of each type.
std::map<std::string, int> count_by_type(const db::result& claimed) {
  std::map<std::string, int> out;
  for (int i = 0; i < claimed.rows(); ++i) ++out[claimed.string(i, 1)];
  return out;
}

/// Puts the tasks `where` selects a minute earlier in claim order.
void make_older(const task_database& db, const std::string& where) {
  db.exec("UPDATE taskmill.tasks SET execute_at = execute_at - interval '1 minute' WHERE " + where);
}

/// What a claim took: the keys of its tasks, sorted, but of those of one type
/// only how many.
struct claimed_keys {
  std::vector<std::string> keys;
  int of_type_apart = 0;
};

claimed_keys keys_claimed(const task_database& db, const std::string& claim,
                          const std::string& type_apart = "") {
  auto res = db.exec(claim);
  auto key = res.column("key");
  claimed_keys out;
  for (int i = 0; i < res.rows(); ++i) {
    if (res.string(i, 1) == type_apart) {
      ++out.of_type_apart;
      continue;
    }
    out.keys.push_back(res.string(i, key));
  }
  std::sort(out.keys.begin(), out.keys.end());
  return out;
}

/// Tasks of the types without a limit, oldest first, beside a limited type
/// with more due work than its room.
std::vector<std::string> other_keys_claimed(const task_database& db, const std::string& types,
                                            int capped_expected) {
  auto got =
      keys_claimed(db, claim_sql("a", 8, "{0,0,8,0,0}", "{CAPPED}", "{5}", 0, types), "CAPPED");
  BOOST_CHECK_EQUAL(got.of_type_apart, capped_expected);
  return got.keys;
}

/// Tasks of O1 and O2 due 50, 40, 30 and 20 seconds ago, the oldest in O2
/// (second in a node's list), and one of `pinned_type` due before them all,
/// pinned to another node.
void submit_others_and_a_pinned_one(const task_database& db, const std::string& pinned_type) {
  db.call("submit('O2', 'o2-first', execute_at => now() - interval '50 seconds')");
  db.call("submit('O1', 'o1-second', execute_at => now() - interval '40 seconds')");
  db.call("submit('O2', 'o2-third', execute_at => now() - interval '30 seconds')");
  db.call("submit('O1', 'o1-fourth', execute_at => now() - interval '20 seconds')");
  db.call("submit('" + pinned_type + "', 'pinned', execute_at => now() - interval '60 seconds')");
  db.exec("UPDATE taskmill.tasks SET pinned_node = 'elsewhere' WHERE key = 'pinned'");
}

/// Claims with `sql` in a transaction of its own, rolled back after: it
/// takes `expected` tasks, its index scans fetch under 200 rows and no
/// sequential scan reads any.
void check_claim_reads_little(const task_database& db, const std::string& sql, int expected) {
  auto conn = db.connect();
  BOOST_REQUIRE(conn.exec("BEGIN"));
  auto claimed = conn.exec(sql);
  BOOST_REQUIRE(claimed);
  BOOST_CHECK_EQUAL(claimed->rows(), expected);
  auto read = conn.exec(
      "SELECT idx_tup_fetch, seq_tup_read FROM pg_stat_xact_user_tables "
      "WHERE schemaname = 'taskmill' AND relname = 'live_tasks'");
  BOOST_REQUIRE(read);
  BOOST_CHECK_LT(read->int64(0, 0), 200);
  BOOST_CHECK_EQUAL(read->int64(0, 1), 0);
  BOOST_REQUIRE(conn.exec("ROLLBACK"));
}

}  // namespace

BOOST_AUTO_TEST_SUITE(claim)

BOOST_AUTO_TEST_CASE(due_tasks_in_priority_then_time_then_id_order) {
  task_database db{"order"};
  db.call("submit('T', 'late-low', execute_at => now() - interval '1 minute', priority => 5)");
  db.call("submit('T', 'early-mid', execute_at => now() - interval '3 minute', priority => 3)");
  db.call("submit('T', 'late-mid', execute_at => now() - interval '2 minute', priority => 3)");
  db.call("submit('T', 'high', execute_at => now() - interval '1 minute', priority => 1)");
  db.call("submit('T', 'future', execute_at => now() + interval '1 hour', priority => 1)");
  auto claimed = db.claim(10, "node-a");
  std::vector<std::string> keys;
  for (const auto& t : claimed) keys.push_back(t.key);
  BOOST_CHECK((keys == std::vector<std::string>{"high", "early-mid", "late-mid", "late-low"}));
  for (const auto& t : claimed) {
    BOOST_CHECK_EQUAL(t.status, "running");
    BOOST_CHECK_EQUAL(t.attempt, 1);
    BOOST_CHECK_EQUAL(t.picked_by, "node-a");
  }
  BOOST_CHECK(db.claim(10).empty());
  BOOST_CHECK_EQUAL(db.scalar("SELECT count(*) FROM taskmill.tasks WHERE status = 'running' AND "
                              "started_at IS NOT NULL AND heartbeat_at IS NOT NULL"),
                    "4");
}

BOOST_AUTO_TEST_CASE(the_next_due_time_is_told_by_the_database_clock) {
  task_database db{"nextdue"};
  db.call("submit('T', 'a', execute_at => now() + interval '90 seconds')");
  db.call("submit('OTHER', 'b', execute_at => now() + interval '30 seconds')");
  auto in_seconds = [&](const std::string& args) {
    return std::stod(
        db.scalar("SELECT extract(epoch from next_due_at - db_now) FROM "
                  "taskmill.next_due_times(" +
                  args + ")"));
  };
  BOOST_CHECK_CLOSE(in_seconds("NULL, 600000, 'n'"), 30.0, 5.0);
  BOOST_CHECK_CLOSE(in_seconds("'{T}', 600000, 'n'"), 90.0, 5.0);
  BOOST_CHECK_EQUAL(db.scalar("SELECT (next_due_at IS NULL AND NOT due_now)::text "
                              "FROM taskmill.next_due_times('{NONE}', 600000, 'n')"),
                    "true");
  // Beyond the horizon (the node's poll interval) nothing is looked for.
  BOOST_CHECK_EQUAL(
      db.scalar("SELECT next_due_at IS NULL FROM taskmill.next_due_times(NULL, 20000, 'n')"), "t");
  // Nodes of the releases before ask for one time, some without a horizon.
  BOOST_CHECK_CLOSE(std::stod(db.scalar("SELECT extract(epoch from next_due_at - db_now) FROM "
                                        "taskmill.next_due('{T}', 600000, 'n')")),
                    90.0, 5.0);
  BOOST_CHECK_CLOSE(
      std::stod(db.scalar(
          "SELECT extract(epoch from next_due_at - db_now) FROM taskmill.next_due('{T}')")),
      90.0, 5.0);
}

// A task come due that the claim did not take (its type held at its limit)
// is told apart from the next due time still to come, which it no longer
// hides: the pusher pauses for the one and wakes for the other.
BOOST_AUTO_TEST_CASE(work_due_untaken_does_not_hide_the_next_due_time) {
  task_database db{"nextdue_held"};
  db.call("submit('HELD', 'now')");
  db.call("submit('LATER', 'later', execute_at => now() + interval '30 seconds')");
  BOOST_CHECK_EQUAL(db.scalar("SELECT due_now::text || ' ' || round(extract(epoch from "
                              "next_due_at - db_now)) FROM taskmill.next_due_times(NULL, "
                              "600000, 'n')"),
                    "true 30");
  // Nodes of the releases before are told work is due now, as they were.
  BOOST_CHECK_EQUAL(db.scalar("SELECT (next_due_at = db_now)::text FROM "
                              "taskmill.next_due(NULL, 600000, 'n')"),
                    "true");
  // Work due for longer than a second is the claims' to find, not a reason
  // to claim again soon.
  db.exec("UPDATE taskmill.tasks SET execute_at = now() - interval '2 seconds' WHERE key = 'now'");
  BOOST_CHECK_EQUAL(
      db.scalar("SELECT due_now::text FROM taskmill.next_due_times(NULL, 600000, 'n')"), "false");
  BOOST_CHECK_EQUAL(
      db.scalar("SELECT due_now::text FROM taskmill.next_due_times('{LATER}', 600000, 'n')"),
      "false");
}

BOOST_AUTO_TEST_CASE(a_node_claims_only_the_types_it_runs) {
  task_database db{"types"};
  insert_due(db, "A", 3, 5);
  insert_due(db, "B", 3, 5);
  auto res = db.exec(claim_sql("n", 100, "{}", "{}", "{}", 0, "'{A}'"));
  BOOST_CHECK_EQUAL(res.rows(), 5);
  for (int i = 0; i < res.rows(); ++i) BOOST_CHECK_EQUAL(res.string(i, 1), "A");
}

// After a claim that took fewer tasks than it had permits for, a node takes
// every due task it may run at once: not those of other types, those pinned
// to another node, or those not due yet. Every level gets all it has, so the
// turns go as far as they reach.
BOOST_AUTO_TEST_CASE(a_claim_after_a_short_one_takes_every_due_task_it_may_run) {
  task_database db{"alldue"};
  submit_others_and_a_pinned_one(db, "O1");
  db.call("submit('O1', 'high', execute_at => now() - interval '1 second', priority => 1)");
  db.call("submit('O1', 'future', execute_at => now() + interval '1 hour', priority => 1)");
  db.call("submit('OTHER', 'foreign', execute_at => now() - interval '70 seconds')");
  db.call("submit('O2', 'pinned-here', execute_at => now() - interval '5 seconds')");
  db.exec("UPDATE taskmill.tasks SET pinned_node = 'a' WHERE key = 'pinned-here'");
  auto claimed = db.exec(after_short_claim_sql("a", 10, "{3,1,3}", 0, "'{O1,O2}'"));
  std::vector<std::string> keys;
  for (int i = 0; i < claimed.rows(); ++i) {
    keys.push_back(claimed.string(i, 4));
    BOOST_CHECK_EQUAL(claimed.int32(i, 3), 1);
    BOOST_CHECK_EQUAL(claimed.int32(i, 5), 3);
  }
  std::sort(keys.begin(), keys.end());
  BOOST_CHECK((keys == std::vector<std::string>{"high", "o1-fourth", "o1-second", "o2-first",
                                                "o2-third", "pinned-here"}));
  BOOST_CHECK_EQUAL(db.scalar("SELECT count(*) FROM taskmill.tasks WHERE status = 'running' "
                              "AND picked_by = 'a' AND started_at IS NOT NULL"),
                    "6");
  BOOST_CHECK_EQUAL(db.scalar("SELECT string_agg(key, ',' ORDER BY key) FROM taskmill.tasks "
                              "WHERE status = 'pending'"),
                    "foreign,future,pinned");
  BOOST_CHECK_EQUAL(db.exec(after_short_claim_sql("a", 10, "{3}", 0, "'{O1,O2}'")).rows(), 0);
}

// With as many tasks due as it has permits, it claims as every claim does:
// by the turns, within the limits; and not at all for a node declared dead.
BOOST_AUTO_TEST_CASE(a_claim_after_a_short_one_keeps_the_limits) {
  task_database db{"allduelimits"};
  insert_due(db, "A", 3, 5);
  insert_due(db, "B", 3, 5);
  // More permits than tasks due, so that only the limits keep the claims
  // short: 4 of A run after the first.
  auto first = count_by_type(db.exec(after_short_claim_sql("n", 20, "{3}", 4)));
  BOOST_CHECK_EQUAL(first["A"], 4);
  auto second =
      count_by_type(db.exec(after_short_claim_sql("n", 20, "{3}", 0, "NULL", "{A}", "{4}")));
  BOOST_CHECK_EQUAL(second["A"], 0);
  BOOST_CHECK_EQUAL(second["B"], 5);
  insert_due(db, "C", 3, 2);
  db.exec("INSERT INTO taskmill.nodes (name, incarnation, stopped_at) VALUES ('gone', 'x', now())");
  BOOST_CHECK_EQUAL(db.exec(after_short_claim_sql("gone", 10, "{3}")).rows(), 0);
  // The last A and both C.
  BOOST_CHECK_EQUAL(db.exec(after_short_claim_sql("n", 10, "{3}")).rows(), 3);
}

BOOST_AUTO_TEST_CASE(the_global_limit_holds_across_claims) {
  task_database db{"global"};
  insert_due(db, "T", 3, 20);
  BOOST_CHECK_EQUAL(db.exec(claim_sql("a", 10, "{}", "{}", "{}", 6)).rows(), 6);
  BOOST_CHECK_EQUAL(db.exec(claim_sql("b", 10, "{}", "{}", "{}", 6)).rows(), 0);
  auto id = db.scalar("SELECT min(id) FROM taskmill.tasks WHERE status = 'running'");
  BOOST_REQUIRE(db.complete(std::stoll(id), 1, "succeeded"));
  BOOST_CHECK_EQUAL(db.exec(claim_sql("b", 10, "{}", "{}", "{}", 6)).rows(), 1);
}

BOOST_AUTO_TEST_CASE(a_type_limit_holds_and_other_types_go_on) {
  task_database db{"typelimit"};
  insert_due(db, "CAPPED", 1, 10);
  insert_due(db, "FREE", 5, 10);
  auto res = db.exec(claim_sql("a", 8, "{}", "{CAPPED}", "{3}"));
  auto by_type = count_by_type(res);
  BOOST_CHECK_EQUAL(by_type["CAPPED"], 3);
  BOOST_CHECK_EQUAL(by_type["FREE"], 5);
  auto more = db.exec(claim_sql("b", 8, "{}", "{CAPPED}", "{3}"));
  for (int i = 0; i < more.rows(); ++i) BOOST_CHECK_EQUAL(more.string(i, 1), "FREE");
  BOOST_CHECK_EQUAL(
      db.scalar("SELECT count(*) FROM taskmill.tasks WHERE type = 'CAPPED' AND status = 'running'"),
      "3");
}

// A type run on executors of limited capacity takes no more than the room
// they have left, nor more than its running limit where it has one too.
BOOST_AUTO_TEST_CASE(executor_capacity_and_running_limits_both_hold) {
  task_database db{"localroom"};
  for (const char* type : {"A", "B", "C", "D", "FREE"}) insert_due(db, type, 1, 10);
  auto res = db.exec(claim_sql("a", 30, "{30,0,0,0,0}", "{A,B}", "{5,2}", 0, "NULL", "'{A,B,C,D}'",
                               "'{2,5,3,-1}'"));
  auto by_type = count_by_type(res);
  BOOST_CHECK_EQUAL(by_type["A"], 2);
  BOOST_CHECK_EQUAL(by_type["B"], 2);
  BOOST_CHECK_EQUAL(by_type["C"], 3);
  BOOST_CHECK_EQUAL(by_type["D"], 0);
  BOOST_CHECK_EQUAL(by_type["FREE"], 10);
}

// Each type with a limit takes its room with its own tasks, level by level,
// whichever type's tasks come first in claim order.
BOOST_AUTO_TEST_CASE(each_limited_type_claims_its_own_tasks) {
  task_database db{"typelimits"};
  insert_due(db, "LATE", 3, 10);
  insert_due(db, "EARLY", 3, 10);
  make_older(db, "type = 'EARLY'");
  auto res = db.exec(claim_sql("a", 10, "{0,0,10,0,0}", "{LATE,EARLY}", "{2,3}"));
  auto by_type = count_by_type(res);
  BOOST_CHECK_EQUAL(by_type["LATE"], 2);
  BOOST_CHECK_EQUAL(by_type["EARLY"], 3);
  BOOST_CHECK_EQUAL(res.rows(), 5);
}

// Limited types with room take a level together, in claim order, each as
// far as its room allows, and what each took counts against its room at the
// next level.
BOOST_AUTO_TEST_CASE(limited_types_with_room_claim_in_claim_order) {
  task_database db{"together"};
  insert_due(db, "A", 1, 2);
  insert_due(db, "B", 1, 2);
  insert_due(db, "A", 2, 5);
  insert_due(db, "B", 2, 5);
  make_older(db, "type = 'B' AND priority = 1");
  // Keys are type-level-n, n in claim order within its type and level.
  BOOST_CHECK((keys_claimed(db, claim_sql("a", 12, "{2,10,0,0,0}", "{A,B}", "{4,4}")).keys ==
               std::vector<std::string>{"A-2-1", "A-2-2", "A-2-3", "A-2-4", "B-1-1", "B-1-2",
                                        "B-2-1", "B-2-2"}));
}

// A limited type that reaches its room in such a search leaves the rest of
// the level to the others, within the level's turns (not to a level without
// them); what it was found beyond its room stays due.
BOOST_AUTO_TEST_CASE(a_limited_type_at_its_room_leaves_the_level_to_the_others) {
  task_database db{"roomreached"};
  insert_due(db, "FREE", 1, 2);
  insert_due(db, "FREE", 3, 2);
  insert_due(db, "A", 3, 5);
  make_older(db, "type = 'A'");
  auto got = keys_claimed(db, claim_sql("a", 3, "{0,0,3,0,0}", "{A}", "{1}"), "A");
  BOOST_CHECK_EQUAL(got.of_type_apart, 1);
  BOOST_CHECK((got.keys == std::vector<std::string>{"FREE-3-1", "FREE-3-2"}));
  BOOST_CHECK_EQUAL(
      db.scalar("SELECT count(*) FROM taskmill.tasks WHERE type = 'A' AND status = 'pending'"),
      "4");
}

// Tasks of several types read each from the index led by its type come out
// oldest first over them all, whether the types interleave or one type holds
// every oldest task (which takes a second read).
BOOST_AUTO_TEST_CASE(tasks_of_several_types_are_merged_oldest_first) {
  task_database db{"mergetypes"};
  auto insert = [&](const std::string& prefix, int n, const std::string& type,
                    const std::string& since) {
    db.exec(
        "INSERT INTO taskmill.tasks (type, key, execute_at, trace_id, priority, max_retries, "
        "timeout_ms, backoff_kind, backoff_base_ms, backoff_cap_ms, backoff_jitter) SELECT " +
        type + ", '" + prefix + "' || g, now() - interval '" + since +
        "' + g * interval '1 s', 't', 3, 2, 5000, 'fixed', 1, 1000, 0 "
        "FROM generate_series(1, " +
        std::to_string(n) + ") g");
  };
  insert("mixed-", 90, "(ARRAY['X', 'Y', 'Z'])[1 + g % 3]", "1 hour");
  insert("early-", 40, "'X'", "2 hours");
  auto oldest = [&](int n) {
    return db.scalar(
        "SELECT array_agg(id ORDER BY execute_at, id)::text FROM (SELECT id, "
        "execute_at FROM taskmill.tasks WHERE status = 'pending' "
        "ORDER BY execute_at, id LIMIT " +
        std::to_string(n) + ") o");
  };
  auto merged = [&](int n) {
    return db.scalar(
        "SELECT array_agg(t.id ORDER BY t.execute_at, t.id)::text FROM "
        "unnest(taskmill.lock_oldest_of_types('{X,Y,Z}', 3, 'n1', " +
        std::to_string(n) + ")) AS m(id) JOIN taskmill.tasks t ON t.id = m.id");
  };
  // The 40 of X alone first, then the three types in turn.
  BOOST_CHECK_EQUAL(merged(30), oldest(30));
  BOOST_CHECK_EQUAL(merged(70), oldest(70));
  BOOST_CHECK_EQUAL(merged(200), oldest(130));
  db.exec(
      "UPDATE taskmill.tasks SET status = 'succeeded' WHERE execute_at < now() - "
      "interval '90 minutes'");
  BOOST_CHECK_EQUAL(merged(45), oldest(45));
}

// A claim locks only the tasks it takes: those of a limited type beyond its
// room stay free for other claims while it runs.
BOOST_AUTO_TEST_CASE(a_claim_locks_no_task_beyond_a_limited_types_room) {
  task_database db{"nooverlock"};
  db.insert_tasks(40, "(ARRAY['A', 'B'])[1 + g % 2]", "now() - interval '1 s'");
  auto claiming = db.connect();
  BOOST_REQUIRE(claiming.exec("BEGIN"));
  auto claimed = claiming.exec(
      "SELECT type FROM taskmill.claim_by_turns('n1', 20, '{3}', '{A}', '{3}', 0, NULL, NULL, "
      "NULL)");
  BOOST_REQUIRE(claimed);
  BOOST_CHECK_EQUAL(claimed->rows(), 20);
  auto other = db.connect();
  auto free = other.exec(
      "SELECT count(*) FILTER (WHERE type = 'A'), count(*) FROM (SELECT type FROM "
      "taskmill.tasks WHERE status IN ('pending', 'failed') FOR UPDATE SKIP LOCKED) f");
  BOOST_REQUIRE(free);
  BOOST_CHECK_EQUAL(free->int64(0, 0), 17);
  BOOST_CHECK_EQUAL(free->int64(0, 1), 20);
  BOOST_REQUIRE(claiming.exec("ROLLBACK"));
}

// What a search in claim order found is taken from each limited type's room.
BOOST_AUTO_TEST_CASE(found_tasks_are_taken_from_each_limited_types_room) {
  task_database db{"roomsafter"};
  auto after = [&](const std::string& rooms) {
    return db.scalar("SELECT taskmill.rooms_after('{A,B,A,FREE,A,B}', '{A,B}', '" + rooms +
                     "')::text");
  };
  BOOST_CHECK_EQUAL(after("{3,2}"), "{0,0}");
  BOOST_CHECK_EQUAL(after("{7,5}"), "{4,3}");
  BOOST_CHECK_EQUAL(db.scalar("SELECT taskmill.rooms_after('{FREE}', '{A,B}', '{1,2}')::text"),
                    "{1,2}");
}

BOOST_AUTO_TEST_CASE(other_types_beside_a_limited_backlog_go_oldest_first) {
  for (const std::string types : {"NULL", "'{CAPPED,O1,O2}'"}) {
    BOOST_TEST_CONTEXT("types " << types) {
      task_database db{types == "NULL" ? "besideany" : "besidelist"};
      insert_due(db, "CAPPED", 3, 50);
      submit_others_and_a_pinned_one(db, "O3");
      BOOST_CHECK((other_keys_claimed(db, types, 5) ==
                   std::vector<std::string>{"o1-second", "o2-first", "o2-third"}));
      // The limited type at its limit: the others go on.
      BOOST_CHECK((other_keys_claimed(db, types, 0) == std::vector<std::string>{"o1-fourth"}));
    }
  }
}

// Where the limited type's due tasks lie among the others' rather than
// before them all, the others are still claimed oldest first.
BOOST_AUTO_TEST_CASE(other_types_amid_a_limited_backlog_go_oldest_first) {
  for (const std::string types : {"NULL", "'{CAPPED,O1,O2}'"}) {
    BOOST_TEST_CONTEXT("types " << types) {
      task_database db{types == "NULL" ? "amidany" : "amidlist"};
      insert_due(db, "CAPPED", 3, 50);
      submit_others_and_a_pinned_one(db, "O3");
      db.exec(
          "UPDATE taskmill.tasks SET execute_at = now() - interval '35 seconds' "
          "WHERE type = 'CAPPED' AND split_part(key, '-', 3)::integer > 25");
      BOOST_CHECK((other_keys_claimed(db, types, 5) ==
                   std::vector<std::string>{"o1-second", "o2-first", "o2-third"}));
      BOOST_CHECK((other_keys_claimed(db, types, 0) == std::vector<std::string>{"o1-fourth"}));
    }
  }
}

// Telling the other types' tasks from a limited type's backlog takes no
// reading of that backlog (it did: every due task of the level, at every
// claim): rows fetched by the claim's index scans, in its transaction.
// The backlog may be due before the other types' tasks (a search in claim
// order from the oldest of theirs passes it) or after them.
BOOST_AUTO_TEST_CASE(claims_beside_a_limited_backlog_do_not_read_it) {
  for (bool others_older : {false, true}) {
    BOOST_TEST_CONTEXT("the other types' tasks " << (others_older ? "older" : "newer")) {
      task_database db{others_older ? "backlogcapnewer" : "backlogcap"};
      insert_due(db, "CAPPED", 3, 20000);
      insert_due(db, "OTHER", 3, 3);
      if (others_older) make_older(db, "type = 'OTHER'");
      db.exec("VACUUM ANALYZE taskmill.tasks");
      for (const std::string types : {"NULL", "'{CAPPED,OTHER}'"}) {
        BOOST_TEST_CONTEXT("types " << types) {
          check_claim_reads_little(
              db, claim_sql("a", 20, "{0,0,20,0,0}", "{CAPPED}", "{10}", 0, types), 13);
        }
      }
    }
  }
}

// A node that runs only some types claims its own without reading through
// the due tasks of a type it does not run, a backlog no node may run: it did,
// at every claim, whether that backlog came due before its tasks (the claim's
// search) or after them (the probe for levels with due work).
BOOST_AUTO_TEST_CASE(claims_beside_a_backlog_of_other_types_do_not_read_it) {
  for (const std::string due : {"2 minutes", "30 seconds"}) {
    BOOST_TEST_CONTEXT("the backlog due " << due << " ago, the node's tasks 1 minute ago") {
      task_database db{due == "2 minutes" ? "backlogolder" : "backlognewer"};
      insert_due(db, "BACKLOG", 3, 20000);
      db.exec("UPDATE taskmill.tasks SET execute_at = now() - interval '" + due + "'");
      insert_due(db, "MINE", 3, 3);
      // Without the entries of the versions before the update: claims of
      // their own would step over those as dead.
      db.exec("VACUUM ANALYZE taskmill.tasks");
      // Several types are merged; one alone is locked as it is read.
      for (const std::string types : {"'{MINE,ALSO}'", "'{MINE}'"}) {
        BOOST_TEST_CONTEXT("types " << types) {
          check_claim_reads_little(db, claim_sql("a", 20, "{0,0,20,0,0}", "{}", "{}", 0, types), 3);
        }
      }
    }
  }
}

// Nor does a claim after a short one: it reads as many due tasks of any type
// as it has permits before it searches as the others do.
BOOST_AUTO_TEST_CASE(a_claim_after_a_short_one_beside_a_backlog_of_other_types_reads_little) {
  task_database db{"backlogalldue"};
  insert_due(db, "BACKLOG", 3, 20000);
  db.exec("UPDATE taskmill.tasks SET execute_at = now() - interval '2 minutes'");
  insert_due(db, "MINE", 3, 3);
  db.exec("VACUUM ANALYZE taskmill.tasks");
  for (const std::string types : {"'{MINE,ALSO}'", "'{MINE}'"}) {
    BOOST_TEST_CONTEXT("types " << types) {
      check_claim_reads_little(db, after_short_claim_sql("a", 20, "{3}", 0, types), 3);
    }
  }
}

// The last pass of a claim, which fills what the turns left over every level
// with due work at once, reads no such backlog either.
BOOST_AUTO_TEST_CASE(the_last_pass_beside_a_backlog_of_other_types_does_not_read_it) {
  task_database db{"backloglast"};
  insert_due(db, "BACKLOG", 2, 20000);
  db.exec("UPDATE taskmill.tasks SET execute_at = now() - interval '2 minutes'");
  insert_due(db, "MINE", 1, 1);
  insert_due(db, "MINE", 2, 5);
  db.exec("VACUUM ANALYZE taskmill.tasks");
  // A turn for the top level only: the rest goes to the last pass.
  check_claim_reads_little(db, claim_sql("a", 6, "{1,0,0,0,0}", "{}", "{}", 0, "'{MINE}'"), 6);
}

// Beside such a backlog the node's types are searched one by one: their
// tasks still go oldest first across them, and a task pinned to another node
// is left.
BOOST_AUTO_TEST_CASE(a_node_beside_a_backlog_of_other_types_claims_its_oldest_first) {
  task_database db{"besidebacklog"};
  insert_due(db, "BACKLOG", 3, 50);
  db.exec("UPDATE taskmill.tasks SET execute_at = now() - interval '2 minutes'");
  submit_others_and_a_pinned_one(db, "O1");
  auto claim = claim_sql("a", 3, "{0,0,0,0,0}", "{}", "{}", 0, "'{O1,O2}'");
  BOOST_CHECK((keys_claimed(db, claim).keys ==
               std::vector<std::string>{"o1-second", "o2-first", "o2-third"}));
  BOOST_CHECK((keys_claimed(db, claim).keys == std::vector<std::string>{"o1-fourth"}));
}

// A claim beside another that holds the oldest tasks of the other types
// takes the next ones, as a claim in claim order skips locked rows.
BOOST_AUTO_TEST_CASE(other_types_beside_a_limited_backlog_skip_what_another_claim_holds) {
  task_database db{"besidelocked"};
  insert_due(db, "CAPPED", 3, 50);
  insert_due(db, "OTHER", 3, 10);
  auto holder = db.connect();
  BOOST_REQUIRE(holder.exec("BEGIN"));
  auto held = holder.exec(
      "SELECT id FROM taskmill.tasks WHERE type = 'OTHER' ORDER BY execute_at, id LIMIT 3 "
      "FOR UPDATE");
  BOOST_REQUIRE(held);
  BOOST_REQUIRE_EQUAL(held->rows(), 3);
  std::set<std::string> held_ids;
  for (int i = 0; i < held->rows(); ++i) held_ids.insert(held->string(i, 0));
  auto res = db.exec(claim_sql("a", 8, "{0,0,8,0,0}", "{CAPPED}", "{5}"));
  int others = 0;
  for (int i = 0; i < res.rows(); ++i) {
    if (res.string(i, 1) != "OTHER") continue;
    ++others;
    BOOST_CHECK(!held_ids.count(res.string(i, 0)));
  }
  BOOST_CHECK_EQUAL(others, 3);
  BOOST_REQUIRE(holder.exec("ROLLBACK"));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(outcomes)

BOOST_AUTO_TEST_CASE(success_clears_the_error_and_keeps_the_retry_count) {
  task_database db{"success"};
  auto t = db.call(
      "submit('T', 'k', max_retries => 3, backoff_kind => 'fixed', backoff_base_ms => 1, "
      "backoff_jitter => 0)");
  auto first = db.claim(1);
  BOOST_REQUIRE(db.complete(t.id, 1, "retry", "flaky"));
  auto failed = db.by_id(t.id);
  BOOST_CHECK_EQUAL(failed.status, "failed");
  BOOST_CHECK_EQUAL(failed.error, "flaky");
  BOOST_CHECK_EQUAL(failed.retry_count, 1);
  BOOST_REQUIRE(test::eventually([&] { return db.claim(1).size() == 1; }));
  db.exec("UPDATE taskmill.tasks SET result = NULL WHERE id = $1", {std::to_string(t.id)});
  BOOST_REQUIRE(db.exec("SELECT applied FROM taskmill.complete_many(ARRAY[$1::bigint], ARRAY[2], "
                        "ARRAY['succeeded'], ARRAY['{\"ok\": true}'::jsonb], ARRAY[NULL], 'n9')",
                        {std::to_string(t.id)})
                    .boolean(0, 0));
  auto done = db.by_id(t.id);
  BOOST_CHECK_EQUAL(done.status, "succeeded");
  BOOST_CHECK_EQUAL(done.error, "");
  BOOST_CHECK_EQUAL(done.retry_count, 1);
  BOOST_CHECK_EQUAL(
      db.scalar("SELECT result::text FROM taskmill.tasks WHERE id = $1", {std::to_string(t.id)}),
      "{\"ok\": true}");
  auto history = db.exec(
      "SELECT attempt, outcome, coalesce(error, ''), node, started_at IS NOT NULL, "
      "finished_at >= started_at FROM taskmill.attempt_history WHERE task_id = $1 ORDER BY attempt",
      {std::to_string(t.id)});
  BOOST_REQUIRE_EQUAL(history.rows(), 2);
  BOOST_CHECK_EQUAL(history.string(0, 1), "retry");
  BOOST_CHECK_EQUAL(history.string(0, 2), "flaky");
  BOOST_CHECK_EQUAL(history.string(1, 1), "succeeded");
  BOOST_CHECK_EQUAL(history.string(1, 3), "n1");
  BOOST_CHECK(history.boolean(1, 4));
  BOOST_CHECK(history.boolean(1, 5));
}

BOOST_AUTO_TEST_CASE(retries_wait_for_their_backoff_then_run_again) {
  task_database db{"retry"};
  auto t = db.call(
      "submit('T', 'k', max_retries => 2, backoff_kind => 'fixed', backoff_base_ms => 2000, "
      "backoff_jitter => 0.1)");
  db.claim(1);
  BOOST_REQUIRE(db.complete(t.id, 1, "retry", "e1"));
  auto failed = db.by_id(t.id);
  BOOST_CHECK_EQUAL(failed.status, "failed");
  BOOST_CHECK_GE(failed.execute_in_s, 1.7);
  BOOST_CHECK_LE(failed.execute_in_s, 2.3);
  BOOST_CHECK(db.claim(1).empty());
  db.exec("UPDATE taskmill.tasks SET execute_at = now() WHERE id = $1", {std::to_string(t.id)});
  auto again = db.claim(1);
  BOOST_REQUIRE_EQUAL(again.size(), 1u);
  BOOST_CHECK_EQUAL(again[0].attempt, 2);
}

BOOST_AUTO_TEST_CASE(exhausted_retries_and_unrecoverable_failures_are_dead) {
  task_database db{"dead"};
  auto t = db.call(
      "submit('T', 'k', max_retries => 1, backoff_kind => 'fixed', backoff_base_ms => 1, "
      "backoff_jitter => 0)");
  db.claim(1);
  BOOST_REQUIRE(db.complete(t.id, 1, "retry", "e1"));
  BOOST_CHECK_EQUAL(db.by_id(t.id).status, "failed");
  BOOST_REQUIRE(test::eventually([&] { return db.claim(1).size() == 1; }));
  BOOST_REQUIRE(db.complete(t.id, 2, "retry", "e2"));
  auto dead = db.by_id(t.id);
  BOOST_CHECK_EQUAL(dead.status, "dead");
  BOOST_CHECK_EQUAL(dead.retry_count, 2);
  BOOST_CHECK_EQUAL(dead.error, "e2");

  auto u = db.call("submit('T', 'u', max_retries => 5)");
  db.claim(1);
  BOOST_REQUIRE(db.complete(u.id, 1, "fail", "bad input"));
  BOOST_CHECK_EQUAL(db.by_id(u.id).status, "dead");
  BOOST_CHECK_EQUAL(db.by_id(u.id).retry_count, 1);
}

BOOST_AUTO_TEST_CASE(stale_outcomes_change_nothing) {
  task_database db{"staleout"};
  auto t = db.call("submit('T', 'k')");
  db.claim(1);
  // Wrong attempt.
  BOOST_CHECK(!db.complete(t.id, 2, "succeeded"));
  BOOST_CHECK(!db.complete(t.id, 0, "fail"));
  BOOST_CHECK_EQUAL(db.by_id(t.id).status, "running");
  // The right one applies once; the duplicate is stale.
  BOOST_CHECK(db.complete(t.id, 1, "succeeded"));
  BOOST_CHECK(!db.complete(t.id, 1, "fail", "late"));
  auto done = db.by_id(t.id);
  BOOST_CHECK_EQUAL(done.status, "succeeded");
  BOOST_CHECK_EQUAL(done.error, "");
  BOOST_CHECK_EQUAL(db.scalar("SELECT count(*) FROM taskmill.attempt_history WHERE task_id = $1",
                              {std::to_string(t.id)}),
                    "1");
  // Unknown tasks are stale too.
  BOOST_CHECK(!db.complete(987654, 1, "succeeded"));
}

BOOST_AUTO_TEST_CASE(backoff_delays_grow_and_stop_at_the_cap) {
  task_database db{"backoff"};
  auto delay = [&](const std::string& kind, int retry_count, double jitter = 0) {
    return std::stod(
        db.scalar("SELECT extract(epoch from taskmill.backoff_delay($1, 100, 5000, $2::real, $3))",
                  {kind, std::to_string(jitter), std::to_string(retry_count)}));
  };
  BOOST_CHECK_CLOSE(delay("fixed", 0), 0.1, 1e-6);
  BOOST_CHECK_CLOSE(delay("fixed", 7), 0.1, 1e-6);
  BOOST_CHECK_CLOSE(delay("exponential", 0), 0.1, 1e-6);
  BOOST_CHECK_CLOSE(delay("exponential", 3), 0.8, 1e-6);
  BOOST_CHECK_CLOSE(delay("exponential", 10), 5.0, 1e-6);
  BOOST_CHECK_CLOSE(delay("exponential", 1000), 5.0, 1e-6);
  for (int i = 0; i < 50; ++i) {
    auto d = delay("exponential", 2, 0.5);
    BOOST_CHECK_GE(d, 0.2 - 1e-9);
    BOOST_CHECK_LE(d, 0.6 + 1e-9);
  }
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(fairness)

namespace {

/// `count` tasks of `type` running on another node, for the limits to count.
void run_elsewhere(const task_database& db, int count, const std::string& type = "ELSEWHERE") {
  db.exec(
      "INSERT INTO taskmill.tasks (type, key, priority, status, attempt, picked_by, "
      "heartbeat_at, started_at, execute_at, trace_id, max_retries, timeout_ms, "
      "backoff_kind, backoff_base_ms, backoff_cap_ms, backoff_jitter) SELECT '" +
      type + "', 'running-' || g, 3, 'running', 1, 'other', now(), now(), now(), 't', 3, " +
      "3600000, 'fixed', 1000, 1000, 0 FROM generate_series(1, " + std::to_string(count) + ") g");
}

/// Runs `rounds` claims of `n` the way the pusher does and counts per level,
/// under a global running limit of `global` (0: none) and the running limits
/// `caps` of the types `capped`.
std::array<int, 5> run_rounds(const task_database& db, fair_shares& shares, int rounds, int n,
                              std::vector<int>* per_round_total = nullptr,
                              std::vector<std::array<int, 5>>* per_round = nullptr, int global = 0,
                              const std::string& capped = "{}", const std::string& caps = "{}",
                              bool after_short_claim = false) {
  std::array<int, 5> total{};
  for (int r = 0; r < rounds; ++r) {
    auto turns = shares.turns(n);
    auto t = taskmill::db::number_array_literal(turns, [](int level) { return level; });
    auto res = db.exec(
        "SELECT id, type, priority, attempt, turns_taken FROM taskmill.claim_by_turns('fair', " +
        std::to_string(n) + ", '" + t + "', '" + capped + "', '" + caps + "', " +
        std::to_string(global) + ", NULL, NULL, NULL, " + (after_short_claim ? "true" : "false") +
        ")");
    int taken = 0;
    for (int i = 0; i < res.rows(); ++i) taken = std::max(taken, res.int32(i, 4));
    fair_shares::counts got{};
    for (int i = 0; i < res.rows(); ++i) ++got[res.int32(i, 2) - 1];
    shares.settle(turns, taken, got);
    for (int l = 0; l < 5; ++l) total[l] += got[l];
    if (per_round_total) per_round_total->push_back(res.rows());
    if (per_round) per_round->push_back(got);
    db.exec(
        "UPDATE taskmill.tasks SET status = 'succeeded' WHERE status = 'running' "
        "AND picked_by = 'fair'");
  }
  return total;
}

/// With work at levels 1 and 5 only, weights 16 and 1: every claim went to
/// one of them, and level 5 got its 1/17 to within 3.
void check_split_16_to_1(const std::array<int, 5>& total, int claims, const std::string& what) {
  BOOST_TEST_MESSAGE(claims << " claims, " << what << ": priority 1 " << total[0] << ", priority 5 "
                            << total[4]);
  BOOST_CHECK_EQUAL(total[0] + total[4], claims);
  BOOST_CHECK_LE(std::abs(total[4] - claims / 17.0), 3.0);
}

}  // namespace

BOOST_AUTO_TEST_CASE(every_level_with_work_gets_its_weighted_share) {
  task_database db{"fairall"};
  constexpr int rounds = 40;
  constexpr int n = 50;  // shares are fractional: 25.8, 12.9, 6.45, 3.2, 1.6
  const std::array<int, 5> weights{16, 8, 4, 2, 1};
  for (int p = 1; p <= 5; ++p) insert_due(db, "F", p, rounds * n);
  fair_shares shares{weights};
  std::vector<int> per_round;
  auto total = run_rounds(db, shares, rounds, n, &per_round);
  for (int l = 0; l < 5; ++l) {
    double expected = double(rounds) * n * weights[l] / 31.0;
    BOOST_TEST_MESSAGE("priority " << l + 1 << ": " << total[l] << " claims, weighted share "
                                   << expected);
    BOOST_CHECK_LE(std::abs(total[l] - expected), n);
    // Much tighter in fact: within a couple of claims.
    BOOST_CHECK_LE(std::abs(total[l] - expected), 3.0);
  }
  for (auto claimed : per_round) BOOST_CHECK_EQUAL(claimed, n);
}

// Levels without work lend their share to those with work, in claims by
// the turns and in claims after short ones, which take every due task at
// once only when fewer are due than they have permits for (in claim order,
// priority 5 would get none here).
BOOST_AUTO_TEST_CASE(levels_without_work_lend_their_share) {
  for (bool after_short_claim : {false, true}) {
    BOOST_TEST_CONTEXT("after a short claim: " << after_short_claim) {
      task_database db{after_short_claim ? "fairtwoaftershort" : "fairtwo"};
      constexpr int rounds = 30;
      constexpr int n = 34;
      insert_due(db, "F", 1, rounds * n);
      insert_due(db, "F", 5, rounds * n);
      fair_shares shares{{16, 8, 4, 2, 1}};
      std::vector<int> per_round;
      auto total =
          run_rounds(db, shares, rounds, n, &per_round, nullptr, 0, "{}", "{}", after_short_claim);
      check_split_16_to_1(total, rounds * n, "only levels 1 and 5 with work");
      for (auto claimed : per_round) BOOST_CHECK_EQUAL(claimed, n);
    }
  }
}

// A node at its limit claims as tasks finish, one or two at a time: the
// shares still hold over the rounds, and the low level is not starved.
BOOST_AUTO_TEST_CASE(rounds_of_one_or_two_claims_keep_the_shares) {
  task_database db{"fairsmall"};
  insert_due(db, "F", 1, 1000);
  insert_due(db, "F", 5, 1000);
  fair_shares shares{{16, 8, 4, 2, 1}};
  std::array<int, 5> total{};
  for (int n : {1, 2}) {
    auto got = run_rounds(db, shares, 170, n);
    for (int l = 0; l < 5; ++l) total[l] += got[l];
  }
  check_split_16_to_1(total, 510, "rounds of 1 and 2");
}

// Running tasks elsewhere in the cluster leave the global limit room for one
// or two claims of the 50 a node asks for: the room is still shared by
// weight, and the lightest level is not starved.
BOOST_AUTO_TEST_CASE(claims_cut_short_by_the_global_limit_keep_the_shares) {
  task_database db{"fairglobal"};
  insert_due(db, "F", 1, 1000);
  insert_due(db, "F", 5, 1000);
  run_elsewhere(db, 48);
  fair_shares shares{{16, 8, 4, 2, 1}};
  std::array<int, 5> total{};
  for (int global : {49, 50}) {
    auto got = run_rounds(db, shares, 170, 50, nullptr, nullptr, global);
    for (int l = 0; l < 5; ++l) total[l] += got[l];
  }
  check_split_16_to_1(total, 510, "room for 1 and 2");
}

// A level whose due work is all of a type at its running limit claims
// nothing; its probe comes first in every round and takes the one place the
// global limit leaves. That place then goes to the turns after it, not to the
// top level: the lightest level still gets its share.
BOOST_AUTO_TEST_CASE(a_probe_that_finds_no_room_leaves_its_place_to_the_turns) {
  task_database db{"fairprobe"};
  insert_due(db, "F", 1, 1000);
  insert_due(db, "F", 5, 1000);
  insert_due(db, "CAPPED", 3, 100);
  run_elsewhere(db, 47);
  run_elsewhere(db, 1, "CAPPED");
  fair_shares shares{{16, 8, 4, 2, 1}};
  auto total = run_rounds(db, shares, 340, 50, nullptr, nullptr, 49, "{CAPPED}", "{1}");
  BOOST_CHECK_EQUAL(total[2], 0);
  check_split_16_to_1(total, 340, "room for 1");
}

BOOST_AUTO_TEST_CASE(a_single_level_with_work_gets_all_capacity) {
  task_database db{"fairone"};
  insert_due(db, "F", 5, 500);
  fair_shares shares{{16, 8, 4, 2, 1}};
  std::vector<int> per_round;
  auto total = run_rounds(db, shares, 10, 50, &per_round);
  BOOST_CHECK_EQUAL(total[4], 500);
  for (auto claimed : per_round) BOOST_CHECK_EQUAL(claimed, 50);
}

BOOST_AUTO_TEST_CASE(a_level_that_gets_work_gets_its_share_within_a_round) {
  task_database db{"fairlate"};
  constexpr int n = 62;  // whole shares: 32, 16, 8, 4, 2
  for (int p : {1, 2, 4, 5}) insert_due(db, "F", p, 2000);
  fair_shares shares{{16, 8, 4, 2, 1}};
  run_rounds(db, shares, 5, n);
  insert_due(db, "F", 3, 2000);
  std::vector<std::array<int, 5>> per_round;
  run_rounds(db, shares, 6, n, nullptr, &per_round);
  // Round 1 notices the work (probe); from round 2 on level 3 gets its share.
  BOOST_CHECK_GE(per_round[0][2], 1);
  for (size_t r = 2; r < per_round.size(); ++r) BOOST_CHECK_LE(std::abs(per_round[r][2] - 8), 1);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(races)

BOOST_AUTO_TEST_CASE(concurrent_claimers_never_run_a_task_twice_under_one_attempt) {
  task_database db{"claimrace"};
  constexpr int tasks = 3000;
  db.insert_tasks(tasks, "'R'", "now() - interval '1 s'");
  race_record record;
  std::atomic<int> stale{0};
  race_claimers(
      db, 6, 3, record,
      [](int w, std::mt19937& rng) { return claim_sql("w" + std::to_string(w), 1 + rng() % 40); },
      finish_a_third_retried(record, stale));
  check_every_task_ran_once_an_attempt(db, record, stale, tasks);
  BOOST_CHECK_EQUAL(db.scalar("SELECT count(*) FROM taskmill.attempt_history"),
                    std::to_string(record.runs.size()));
}

// Tasks come due a few at a time over a second, as in pickups, of three types
// and five levels, some pinned to one claimer; claimers take them after short
// claims (a bounded read without locks, then a lock) or as full claims, racing
// for the same few tasks. No task runs twice under one attempt, and every one
// finishes, pinned ones on their node.
BOOST_AUTO_TEST_CASE(claimers_after_short_claims_never_run_a_task_twice) {
  task_database db{"allduerace"};
  constexpr int tasks = 3000;
  db.insert_tasks(tasks, "(ARRAY['A', 'B', 'C'])[1 + g % 3]",
                  "now() + (g % 1000) * interval '1 ms'", "1 + g % 5");
  db.exec("UPDATE taskmill.tasks SET pinned_node = 'w1' WHERE id % 25 = 0");
  race_record record;
  std::atomic<int> stale{0};
  race_claimers(
      db, 6, 3, record,
      [](int w, std::mt19937& rng) {
        auto node = "w" + std::to_string(w);
        if (rng() % 4 == 0) return claim_sql(node, 1 + rng() % 40);
        return after_short_claim_sql(node, 1 + rng() % 60, "{1,2,3,4,5}");
      },
      finish_a_third_retried(record, stale));
  check_every_task_ran_once_an_attempt(db, record, stale, tasks);
  BOOST_CHECK_EQUAL(db.scalar("SELECT count(*) FROM taskmill.tasks WHERE pinned_node = 'w1' "
                              "AND picked_by IS DISTINCT FROM 'w1'"),
                    "0");
}

// Claimers that each run only some types race beside due tasks of a type none
// of them runs, at both ends of every level, so that they search type by type
// (several types merged, or one alone) where they would search in claim
// order; a third of the executions fail and come due again, and some tasks
// are pinned to one of them or to a node that is not there. No task runs
// twice under one attempt, every one of theirs finishes, pinned ones only on
// their node, and the others are left as they were.
BOOST_AUTO_TEST_CASE(claimers_beside_types_they_do_not_run_never_run_a_task_twice) {
  task_database db{"typesrace"};
  db.insert_tasks(4000,
                  "CASE WHEN g <= 500 OR g > 3500 THEN 'Z' "
                  "ELSE (ARRAY['A', 'B', 'C'])[1 + g % 3] END",
                  "now() - CASE WHEN g <= 500 THEN interval '3 s' WHEN g > 3500 "
                  "THEN interval '10 ms' ELSE interval '2 s' END",
                  "1 + g % 5");
  db.exec(
      "UPDATE taskmill.tasks SET pinned_node = CASE WHEN id % 40 = 0 THEN 'w0' ELSE 'gone' END "
      "WHERE type <> 'Z' AND id % 20 = 0");
  const auto pinned_to_gone =
      db.scalar("SELECT count(*) FROM taskmill.tasks WHERE pinned_node = 'gone'");
  BOOST_REQUIRE_GT(std::stoi(pinned_to_gone), 0);
  const std::vector<std::string> types_of{"'{A,B,C}'", "'{A,B}'", "'{C}'"};
  race_record record;
  std::atomic<int> stale{0};
  race_claimers(
      db, 6, 3, record,
      [&](int w, std::mt19937& rng) {
        return claim_sql("w" + std::to_string(w), 1 + rng() % 40, "{}", "{}", "{}", 0,
                         types_of[w % types_of.size()]);
      },
      finish_a_third_retried(record, stale));
  BOOST_CHECK_EQUAL(record.errors.load(), 0);
  BOOST_CHECK_EQUAL(stale.load(), 0);
  BOOST_CHECK_EQUAL(record.claimed_twice(), 0);
  BOOST_CHECK_EQUAL(db.scalar("SELECT count(*) FROM taskmill.tasks WHERE type <> 'Z' "
                              "AND pinned_node IS DISTINCT FROM 'gone' "
                              "AND status NOT IN ('succeeded', 'dead')"),
                    "0");
  BOOST_CHECK_EQUAL(db.scalar("SELECT count(*) FROM taskmill.tasks WHERE pinned_node = 'w0' "
                              "AND picked_by IS DISTINCT FROM 'w0'"),
                    "0");
  BOOST_CHECK_EQUAL(db.scalar("SELECT count(*) FROM taskmill.tasks WHERE pinned_node = 'gone' "
                              "AND status = 'pending' AND attempt = 0"),
                    pinned_to_gone);
  BOOST_CHECK_EQUAL(db.scalar("SELECT sum(attempt) FROM taskmill.tasks WHERE type <> 'Z'"),
                    std::to_string(record.runs.size()));
  BOOST_CHECK_EQUAL(db.scalar("SELECT count(*) FROM taskmill.tasks WHERE type = 'Z' "
                              "AND status = 'pending' AND attempt = 0"),
                    "1000");
  BOOST_CHECK_GT(record.runs.size(), static_cast<size_t>(3000));
}

// SPEC §4: running limits are counted in the database and hold for the whole
// cluster. Claimers race on connections of their own under two type limits,
// a global limit and a type without one, with random turns over all five
// levels, and finish what they claim; a watcher reading the running tasks all
// along never sees a limit passed, and no task runs twice under one attempt.
namespace {

/// Five claimers race under limits while a watcher reads the running tasks;
/// with `tallied` the claims read the limits' use from the tally, and some
/// attempts end as retries or lost, not all as successes.
void race_under_running_limits(bool tallied) {
  task_database db{tallied ? "limittally" : "limitrace"};
  if (tallied) db.exec("SELECT taskmill.track_running('{A,B}', true)");
  constexpr int tasks = 1500;
  constexpr int limit_a = 4, limit_b = 3, global = 9;
  db.insert_tasks(tasks, "(ARRAY['A', 'B', 'C'])[1 + g % 3]", "now() - interval '1 s'",
                  "1 + g % 5");
  race_record record;
  std::atomic<bool> claiming{true};
  std::atomic<int> samples{0};
  std::atomic<int> over_limit{0};
  std::thread watcher([&] {
    auto conn = db.connect();
    while (claiming) {
      auto running = conn.exec(
          "SELECT count(*) FILTER (WHERE type = 'A'), count(*) FILTER (WHERE type = 'B'), "
          "count(*) FROM taskmill.tasks WHERE status = 'running'");
      if (!running) {
        ++record.errors;
        continue;
      }
      ++samples;
      if (running->int64(0, 0) > limit_a || running->int64(0, 1) > limit_b ||
          running->int64(0, 2) > global)
        ++over_limit;
    }
  });
  std::string first_error;
  // The leader's recount runs beside them, as every sweep does.
  std::thread recounter([&] {
    auto conn = db.connect();
    while (tallied && claiming) {
      if (auto recounted = conn.exec("SELECT taskmill.recount_running()"); !recounted) {
        std::lock_guard<std::mutex> guard{record.mtx};
        if (first_error.empty()) first_error = test::describe(recounted);
        ++record.errors;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds{5});
    }
  });
  race_claimers(
      db, 5, 1, record,
      [&](int w, std::mt19937& rng) {
        return claim_by_random_turns(w, rng, 8,
                                     "'{A,B}', '{" + std::to_string(limit_a) + "," +
                                         std::to_string(limit_b) + "}', " + std::to_string(global));
      },
      [&](db::connection& conn, std::mt19937& rng, const std::vector<int64_t>& ids,
          const std::vector<int64_t>& attempts) {
        // Held for a moment, so that claims meet full limits.
        std::this_thread::sleep_for(std::chrono::microseconds{rng() % 2000});
        auto ending = tallied ? rng() % 8 : 7;
        auto done =
            ending == 0 ? conn.exec("SELECT taskmill.lose_attempts('" + integers(ids) + "', '" +
                                    integers(attempts) + "', 'lost', 'lost in the race')")
            : ending == 1
                ? conn.exec("SELECT count(*) FROM unnest('" + integers(ids) +
                            "'::bigint[]) AS i(id), taskmill.cancel(i.id)")
                : conn.exec("SELECT count(*) FROM taskmill.complete_many('" + integers(ids) +
                            "', '" + integers(attempts) + "', array_fill('" +
                            (ending == 2 ? "retry" : "succeeded") + "'::text, ARRAY[" +
                            std::to_string(ids.size()) + "]), NULL, NULL, 'w')");
        if (!done) {
          std::lock_guard<std::mutex> guard{record.mtx};
          if (first_error.empty()) first_error = test::describe(done);
          ++record.errors;
        }
      });
  claiming = false;
  watcher.join();
  recounter.join();
  BOOST_TEST_MESSAGE("running counts read while claiming: " << samples.load());
  BOOST_CHECK_MESSAGE(record.errors.load() == 0,
                      record.errors.load() << " statements failed, the first: " << first_error);
  BOOST_CHECK_GT(samples.load(), 100);
  BOOST_CHECK_EQUAL(over_limit.load(), 0);
  BOOST_CHECK_EQUAL(record.claimed_twice(), 0);
  BOOST_CHECK_EQUAL(db.scalar("SELECT count(*) FROM taskmill.tasks WHERE status = 'running'"), "0");
  if (!tallied) {
    BOOST_CHECK_EQUAL(record.runs.size(), static_cast<size_t>(tasks));
    BOOST_CHECK_EQUAL(db.scalar("SELECT count(*) FROM taskmill.tasks WHERE status <> 'succeeded'"),
                      "0");
  } else {
    BOOST_CHECK_EQUAL(db.scalar("SELECT taskmill.recount_running()"), "0");
  }
}

}  // namespace

BOOST_AUTO_TEST_CASE(racing_claimers_never_pass_a_running_limit) {
  race_under_running_limits(false);
}

BOOST_AUTO_TEST_CASE(racing_claimers_never_pass_a_tallied_running_limit) {
  race_under_running_limits(true);
}

namespace {

struct submit_op {
  int unit;
  int version;
  std::string outcome;
  int64_t returned_version;
};

/// The submit rules of SPEC §3 after a race: each (unit, version) created
/// once, stale answers name a higher version, the current task of every unit
/// is its highest version, nothing below it waits to run, no version is live
/// twice.
/// taskmill.task_keys holds the identity of every task that is not
/// cancelled, and of nothing else.
void check_task_keys(const task_database& db) {
  BOOST_CHECK_EQUAL(
      db.scalar("SELECT count(*) FROM taskmill.tasks t FULL JOIN taskmill.task_keys k ON k.task_id "
                "= t.id AND k.type = t.type AND k.key = t.key AND k.version = t.version WHERE "
                "(t.id IS NOT NULL AND t.status <> 'cancelled') IS DISTINCT FROM (k.task_id IS "
                "NOT NULL)"),
      "0");
}

void check_submit_rules(const task_database& db, const std::string& type,
                        const std::vector<submit_op>& ops) {
  std::map<std::pair<int, int>, int> created;
  std::map<int, int> max_version;
  for (const auto& o : ops) {
    if (o.outcome == "created") ++created[{o.unit, o.version}];
    if (o.outcome == "stale") BOOST_CHECK_GT(o.returned_version, o.version);
    if (o.outcome != "stale") BOOST_CHECK_EQUAL(o.returned_version, o.version);
    max_version[o.unit] = std::max(max_version[o.unit], o.version);
  }
  for (const auto& [unit_version, n] : created) BOOST_CHECK_EQUAL(n, 1);
  for (const auto& [unit, version] : max_version) {
    auto current =
        db.scalar("SELECT (taskmill.current_task($2, $1)).version", {std::to_string(unit), type});
    BOOST_CHECK_EQUAL(current, std::to_string(version));
  }
  // Nothing below the current version waits to run.
  BOOST_CHECK_EQUAL(
      db.scalar("SELECT count(*) FROM taskmill.tasks t WHERE t.status IN ('pending', 'failed') "
                "AND t.version < (taskmill.current_task(t.type, t.key)).version"),
      "0");
  BOOST_CHECK_EQUAL(
      db.scalar("SELECT count(*) FROM (SELECT type, key, version FROM taskmill.tasks WHERE "
                "status <> 'cancelled' GROUP BY 1, 2, 3 HAVING count(*) > 1) d"),
      "0");
  check_task_keys(db);
}

}  // namespace

BOOST_AUTO_TEST_CASE(concurrent_submits_keep_every_rule) {
  task_database db{"submitrace"};
  constexpr int units = 40;
  constexpr int threads_n = 6;
  constexpr int per_thread = 400;
  std::mutex mtx;
  std::vector<submit_op> ops;
  std::atomic<int> errors{0};
  std::vector<std::thread> threads;
  for (int w = 0; w < threads_n; ++w) {
    threads.emplace_back([&, w] {
      auto conn = db.connect();
      std::mt19937 rng(100 + w);
      for (int i = 0; i < per_thread; ++i) {
        int unit = rng() % units;
        int version = rng() % 6;
        auto res =
            conn.exec("SELECT s.outcome, (s.task).version FROM taskmill.submit('S', $1, $2) s",
                      {std::to_string(unit), std::to_string(version)});
        if (!res) {
          ++errors;
          continue;
        }
        std::lock_guard<std::mutex> guard{mtx};
        ops.push_back({unit, version, res->string(0, 0), res->int64(0, 1)});
      }
    });
  }
  for (auto& t : threads) t.join();
  BOOST_CHECK_EQUAL(errors.load(), 0);
  check_submit_rules(db, "S", ops);
}

BOOST_AUTO_TEST_CASE(batch_and_single_submits_racing_keep_every_rule) {
  // Batches take the set-based path for units without a task and the per-row
  // rules for the rest; single submits race them on the same units.
  task_database db{"batchrace"};
  constexpr int units = 300;
  constexpr int threads_n = 6;
  constexpr int rounds = 60;
  constexpr int batch = 12;
  std::mutex mtx;
  std::vector<submit_op> ops;
  std::atomic<int> errors{0};
  std::vector<std::thread> threads;
  for (int w = 0; w < threads_n; ++w) {
    threads.emplace_back([&, w] {
      auto conn = db.connect();
      std::mt19937 rng(200 + w);
      for (int r = 0; r < rounds; ++r) {
        std::vector<std::pair<int, int>> input;
        int n = w % 2 == 0 ? batch : 1;
        for (int i = 0; i < n; ++i) input.emplace_back(rng() % units, rng() % 4);
        std::vector<taskmill::db::param> types, keys, versions;
        for (const auto& [unit, version] : input) {
          types.emplace_back("B");
          keys.emplace_back(std::to_string(unit));
          versions.emplace_back(std::to_string(version));
        }
        auto res = w % 2 == 0
                       ? conn.exec(
                             "SELECT s.ordinal, s.outcome, s.version FROM "
                             "taskmill.submit_batch($1::text[], $2::text[], $3::bigint[], "
                             "NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, "
                             "NULL, NULL, NULL) s",
                             {taskmill::db::array_literal(types), taskmill::db::array_literal(keys),
                              taskmill::db::array_literal(versions)})
                       : conn.exec(
                             "SELECT 1::bigint, s.outcome, (s.task).version FROM "
                             "taskmill.submit('B', $1, $2) s",
                             {keys[0], versions[0]});
        if (!res || res->rows() != n) {
          ++errors;
          continue;
        }
        std::lock_guard<std::mutex> guard{mtx};
        for (int row = 0; row < res->rows(); ++row) {
          const auto& [unit, version] = input[static_cast<size_t>(res->int64(row, 0) - 1)];
          ops.push_back({unit, version, res->string(row, 1), res->int64(row, 2)});
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  BOOST_CHECK_EQUAL(errors.load(), 0);
  check_submit_rules(db, "B", ops);
}

BOOST_AUTO_TEST_CASE(reschedules_racing_claims_are_never_lost) {
  task_database db{"reschrace"};
  constexpr int units = 30;
  constexpr int reschedulers = 4;
  constexpr int per_thread = 300;
  for (int u = 0; u < units; ++u)
    db.call(
        "submit('RS', '" + std::to_string(u) +
        "', execute_at => now() - interval '1 s', max_retries => 1000, backoff_kind => 'fixed', "
        "backoff_base_ms => 3600000)");
  std::atomic<bool> stop{false};
  std::atomic<int> errors{0};
  std::mutex mtx;
  // unit -> (lock-order time, requested execute_at epoch) of every reschedule.
  std::map<int, std::vector<std::pair<std::string, std::string>>> done;
  std::vector<std::string> outcomes;
  std::vector<std::thread> threads;
  // Workers claim whatever is due and report a retry (failed, due in an hour).
  for (int w = 0; w < 2; ++w) {
    threads.emplace_back([&, w] {
      auto conn = db.connect();
      while (!stop) {
        auto claimed = conn.exec(claim_sql("w" + std::to_string(w), 5));
        if (!claimed) {
          ++errors;
          continue;
        }
        for (int i = 0; i < claimed->rows(); ++i) {
          auto ok = conn.exec(
              "SELECT applied FROM taskmill.complete_many(ARRAY[$1::bigint], ARRAY[$2::int], "
              "ARRAY['retry'], NULL, ARRAY['again'], 'w')",
              {claimed->string(i, 0), claimed->string(i, 3)});
          if (!ok) ++errors;
        }
      }
    });
  }
  std::vector<std::thread> movers;
  for (int r = 0; r < reschedulers; ++r) {
    movers.emplace_back([&, r] {
      auto conn = db.connect();
      std::mt19937 rng(7 + r);
      for (int i = 0; i < per_thread; ++i) {
        int unit = rng() % units;
        // Half the moves make the task due now, so the workers race for it.
        std::string when = rng() % 2 ? "now() - interval '1 ms'"
                                     : "now() + interval '1 day' + " +
                                           std::to_string(rng() % 100000) + " * interval '1 ms'";
        auto res = conn.exec(
            "SELECT clock_timestamp()::text, r.outcome, extract(epoch from "
            "(r.task).execute_at)::text, "
            "extract(epoch from " +
                when + ")::text FROM taskmill.reschedule('RS', $1, " + when + ") r",
            {std::to_string(unit)});
        if (!res) {
          ++errors;
          continue;
        }
        std::lock_guard<std::mutex> guard{mtx};
        outcomes.push_back(res->string(0, 1));
        done[unit].emplace_back(res->string(0, 0), res->string(0, 2));
      }
    });
  }
  for (auto& t : movers) t.join();
  stop = true;
  for (auto& t : threads) t.join();
  BOOST_CHECK_EQUAL(errors.load(), 0);
  BOOST_CHECK_EQUAL(std::count(outcomes.begin(), outcomes.end(), "ignored"), 0);
  BOOST_CHECK_GT(std::count(outcomes.begin(), outcomes.end(), "recreated"), 0);
  for (auto& [unit, moves] : done) {
    std::sort(moves.begin(), moves.end());
    auto live = db.exec(
        "SELECT status::text, extract(epoch from execute_at)::text FROM taskmill.tasks "
        "WHERE type = 'RS' AND key = $1 AND status <> 'cancelled'",
        {std::to_string(unit)});
    BOOST_REQUIRE_EQUAL(live.rows(), 1);
    auto status = live.string(0, 0);
    // The last reschedule holds unless a worker claimed the task after it
    // (then it was due, and retried into the next hour).
    if (status == "pending" || live.string(0, 1) == moves.back().second) {
      BOOST_CHECK_EQUAL(live.string(0, 1), moves.back().second);
    } else {
      BOOST_CHECK_EQUAL(status, "failed");
      BOOST_CHECK_LT(std::stod(moves.back().second),
                     std::stod(db.scalar("SELECT extract(epoch from now())")));
    }
  }
  check_task_keys(db);
}

BOOST_AUTO_TEST_SUITE_END()

// "Why isn't it running?" (SPEC §8): taskmill.waiting_reason, each reason
// arranged in the database as the nodes and the claims would leave it.
BOOST_AUTO_TEST_SUITE(running_tally)

namespace {

/// The tally of type A and of all tasks says as many running as there are.
void check_tally(const task_database& db, const std::string& after) {
  auto tally = db.exec(
      "SELECT (r.t).capped_running[1], (r.t).all_running, "
      "(SELECT count(*) FROM taskmill.tasks WHERE status = 'running' AND type = 'A'), "
      "(SELECT count(*) FROM taskmill.tasks WHERE status = 'running') "
      "FROM (SELECT taskmill.tallied_running('{A}') AS t) r");
  BOOST_TEST_CONTEXT("after " << after) {
    BOOST_CHECK_EQUAL(tally.int64(0, 0), tally.int64(0, 2));
    BOOST_CHECK_EQUAL(tally.int64(0, 1), tally.int64(0, 3));
  }
}

/// Tasks a1..an of type A, tallied with all tasks, all running on n1.
void run_tallied(const task_database& db, int n) {
  for (int i = 1; i <= n; ++i) db.call("submit('A', 'a" + std::to_string(i) + "')");
  db.exec("SELECT taskmill.track_running('{A}', true)");
  BOOST_REQUIRE_EQUAL(db.claim(n, "n1").size(), static_cast<size_t>(n));
}

std::string running_of(const task_database& db, const std::string& key) {
  return db.scalar("SELECT id FROM taskmill.tasks WHERE key = $1 AND status = 'running'", {key});
}

}  // namespace

BOOST_AUTO_TEST_CASE(the_tally_follows_every_way_in_and_out_of_running) {
  task_database db{"tally"};
  for (int i = 1; i <= 12; ++i) db.call("submit('A', 'a" + std::to_string(i) + "')");
  for (int i = 1; i <= 4; ++i) db.call("submit('B', 'b" + std::to_string(i) + "')");
  db.exec("UPDATE taskmill.tasks SET execute_at = now() - interval '1 s'");
  db.exec("SELECT taskmill.track_running('{A}', true)");
  check_tally(db, "tracking");
  db.exec(
      "SELECT count(*) FROM taskmill.claim_by_turns('n1', 3, '{1,2,3}', '{A}', '{100}', 100, "
      "NULL, NULL, NULL)");
  check_tally(db, "a claim under limits");
  db.exec(
      "SELECT count(*) FROM taskmill.claim_by_turns('n1', 40, '{3}', '{}', '{}', 0, '{A}', "
      "NULL, NULL, true)");
  check_tally(db, "a claim of every due task (the short-claim path)");
  BOOST_REQUIRE_EQUAL(db.scalar("SELECT count(*) FROM taskmill.tasks WHERE status = 'running'"),
                      "12");
  db.claim(4, "n2");
  check_tally(db, "a claim of the B tasks");
  BOOST_REQUIRE(db.complete(std::stoll(running_of(db, "a1")), 1, "succeeded"));
  BOOST_REQUIRE(db.complete(std::stoll(running_of(db, "a2")), 1, "retry", "flaky"));
  BOOST_REQUIRE(db.complete(std::stoll(running_of(db, "b1")), 1, "succeeded"));
  check_tally(db, "outcomes");
  db.exec("SELECT taskmill.lose_attempts(ARRAY[" + running_of(db, "a3") +
          "]::bigint[], '{1}', 'lost', 'gone')");
  check_tally(db, "a lost attempt");
  auto term = db.seize_lead();
  db.exec("UPDATE taskmill.tasks SET started_at = now() - interval '1 hour' WHERE key = 'a4'");
  BOOST_CHECK_EQUAL(db.scalar("SELECT taskmill.sweep_timeouts(0, 100, " + term + ")"), "1");
  check_tally(db, "a timeout");
  db.call("cancel(" + running_of(db, "a5") + ")");
  check_tally(db, "a cancel");
  db.call("reschedule('A', 'a6', now() + interval '1 hour')");
  check_tally(db, "a reschedule");
  db.exec("DELETE FROM taskmill.tasks WHERE key = 'a7'");
  check_tally(db, "a delete");
  db.exec("SELECT taskmill.stop_node('n1', 'i1')");
  check_tally(db, "a node's stop");
  BOOST_CHECK_EQUAL(db.scalar("SELECT count(*) FROM taskmill.tasks WHERE status = 'running' AND "
                              "type = 'A'"),
                    "0");
  db.exec(
      "SELECT count(*) FROM taskmill.claim_by_turns('n3', 10, '{3}', '{A}', '{2}', 100, "
      "NULL, NULL, NULL)");
  BOOST_CHECK_EQUAL(db.scalar("SELECT count(*) FROM taskmill.tasks WHERE status = 'running' AND "
                              "type = 'A'"),
                    "2");
  check_tally(db, "a claim to the limit");
  db.exec("SELECT taskmill.register_node('n3', 'i2', '', 5000, NULL)");
  check_tally(db, "a node's restart");
  db.exec(
      "UPDATE taskmill.tasks SET execute_at = now() + interval '1 hour' "
      "WHERE status IN ('pending', 'failed')");
  db.exec("SELECT taskmill.register_node('h', 'i1', '', 60000, NULL)");
  BOOST_REQUIRE_EQUAL(db.scalar("SELECT taskmill.offer_permits('h', NULL, 2, 7, 600000)"), "t");
  db.call("submit('A', 'handed')");
  BOOST_REQUIRE_EQUAL(
      db.scalar("SELECT status || ' ' || picked_by FROM taskmill.tasks WHERE key = 'handed'"),
      "running h");
  check_tally(db, "a hand-off");
  BOOST_CHECK_EQUAL(db.scalar("SELECT taskmill.recount_running()"), "0");
  db.exec("UPDATE taskmill.running_tally SET tasks = tasks + 5 WHERE NOT ended");
  BOOST_CHECK_EQUAL(db.scalar("SELECT taskmill.recount_running()"), "10");
  check_tally(db, "a recount");
}

// The leader's recount of a tally that is the truth takes no lock on it, so
// that claims and outcomes never wait for a count of every running task;
// one that is off is locked and set right.
BOOST_AUTO_TEST_CASE(a_recount_locks_the_tally_only_when_it_is_off) {
  task_database db{"recountlocks"};
  run_tallied(db, 5);
  auto holder = db.connect();
  BOOST_REQUIRE(holder.exec("BEGIN"));
  BOOST_REQUIRE(holder.exec("SELECT * FROM taskmill.running_tally FOR UPDATE"));
  auto leader = db.connect();
  BOOST_REQUIRE(leader.exec("SET lock_timeout = '200ms'"));
  auto recount = leader.exec("SELECT taskmill.recount_running()");
  BOOST_REQUIRE_MESSAGE(recount, test::describe(recount));
  BOOST_CHECK_EQUAL(recount->string(0, 0), "0");
  BOOST_REQUIRE(holder.exec("ROLLBACK"));
  db.exec("UPDATE taskmill.running_tally SET tasks = tasks + 3 WHERE NOT ended AND scope = 'type'");
  BOOST_REQUIRE(holder.exec("BEGIN"));
  BOOST_REQUIRE(holder.exec("SELECT * FROM taskmill.running_tally WHERE ended FOR UPDATE"));
  BOOST_CHECK_MESSAGE(!leader.exec("SELECT taskmill.recount_running()"),
                      "a tally off was recounted without its lock");
  BOOST_REQUIRE(holder.exec("ROLLBACK"));
  BOOST_CHECK_EQUAL(db.scalar("SELECT taskmill.recount_running()"), "3");
  check_tally(db, "the recount");
}

// What a transaction moves in or out of running is tallied as it commits,
// together: what a savepoint rolled back is not, and constraints made
// immediate tally what came before at once, what comes after at the commit.
BOOST_AUTO_TEST_CASE(a_transactions_moves_are_tallied_together_as_it_commits) {
  task_database db{"tallytogether"};
  run_tallied(db, 30);
  check_tally(db, "the claim");
  auto ended_of_a = [](db::connection& conn) {
    auto res = conn.exec(
        "SELECT tasks FROM taskmill.running_tally WHERE scope = 'type' AND name = 'A' AND ended");
    BOOST_REQUIRE(res);
    return res->int64(0, 0);
  };
  auto release = [](int from, int to) {
    return "UPDATE taskmill.tasks SET status = 'pending', picked_by = NULL WHERE key IN (SELECT "
           "'a' || g FROM generate_series(" +
           std::to_string(from) + ", " + std::to_string(to) + ") g)";
  };
  auto conn = db.connect();
  BOOST_REQUIRE(conn.exec("BEGIN"));
  BOOST_REQUIRE(conn.exec(release(1, 10)));
  BOOST_REQUIRE(conn.exec("SAVEPOINT s"));
  BOOST_REQUIRE(conn.exec(release(11, 15)));
  BOOST_REQUIRE(conn.exec("ROLLBACK TO SAVEPOINT s"));
  BOOST_CHECK_EQUAL(ended_of_a(conn), 0);
  BOOST_REQUIRE(conn.exec("SET CONSTRAINTS ALL IMMEDIATE"));
  BOOST_CHECK_EQUAL(ended_of_a(conn), 10);
  BOOST_REQUIRE(conn.exec("SET CONSTRAINTS ALL DEFERRED"));
  BOOST_REQUIRE(conn.exec(release(16, 20)));
  BOOST_CHECK_EQUAL(ended_of_a(conn), 10);
  BOOST_REQUIRE(conn.exec("COMMIT"));
  BOOST_CHECK_EQUAL(ended_of_a(conn), 15);
  check_tally(db, "the transaction");
  BOOST_CHECK_EQUAL(db.scalar("SELECT count(*) FROM taskmill.running_changes"), "0");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(waiting)

struct waiting_reason {
  std::string reason, message;
  bool has_until = false;
};

/// With a lease of 5 s, heartbeats every second and the default weights.
waiting_reason waiting_of(const task_database& db, int64_t id, int global_limit = 0) {
  auto r = db.exec("SELECT reason, message, until IS NOT NULL FROM taskmill.waiting_reason(" +
                   std::to_string(id) + ", 5000, 1000, " + std::to_string(global_limit) +
                   ", '{16,8,4,2,1}')");
  if (r.rows() == 0) return {};
  return {r.string(0, 0), r.string(0, 1), r.boolean(0, 2)};
}

void check_reason(const waiting_reason& w, const std::string& reason, const std::string& part) {
  BOOST_CHECK_EQUAL(w.reason, reason);
  BOOST_CHECK_MESSAGE(w.message.find(part) != std::string::npos,
                      "'" << w.message << "' does not mention '" << part << "'");
}

BOOST_AUTO_TEST_CASE(every_reason_is_reported_where_it_holds) {
  task_database db{"waiting"};
  // n1 runs A and B and is live; nobody runs C.
  db.exec("INSERT INTO taskmill.nodes (name, incarnation, types) VALUES ('n1', 'i1', '{A,B}')");

  auto later = db.call("submit('A', 'later', execute_at => now() + interval '1 hour')");
  auto w = waiting_of(db, later.id);
  check_reason(w, "due_later", "due later");
  BOOST_CHECK(w.has_until);

  auto unrun = db.call("submit('C', 'nobody')");
  check_reason(waiting_of(db, unrun.id), "no_node_for_type", "no live node runs type C");

  auto low = db.call("submit('A', 'low', priority => 5)");
  check_reason(waiting_of(db, low.id), "due_now", "n1");
  auto high = db.call("submit('B', 'high', priority => 1)");
  check_reason(waiting_of(db, low.id), "behind_priorities", "priority 5 gets 6%");
  BOOST_CHECK_EQUAL(waiting_of(db, high.id).reason, "due_now");

  // A type limit of 1 with one running; then the global limit.
  db.exec(
      "INSERT INTO taskmill.task_types (type, timeout_ms, max_retries, backoff_kind, "
      "backoff_base_ms, backoff_cap_ms, backoff_jitter, running_limit) "
      "SELECT 'B', timeout_ms, max_retries, backoff_kind, backoff_base_ms, backoff_cap_ms, "
      "backoff_jitter, 1 FROM taskmill.task_types WHERE type = ''");
  auto running = db.claim(1, "n1");
  BOOST_REQUIRE_EQUAL(running.size(), 1u);
  BOOST_REQUIRE_EQUAL(running[0].id, high.id);
  BOOST_CHECK(waiting_of(db, high.id).reason.empty());
  auto second_b = db.call("submit('B', 'second')");
  check_reason(waiting_of(db, second_b.id), "limit_full", "type B is full: 1 of 1");
  check_reason(waiting_of(db, low.id, 1), "limit_full", "global running limit is full: 1 of 1");

  // A retryable failure waits for its backoff.
  BOOST_REQUIRE(db.complete(high.id, 1, "retry", "connection refused"));
  w = waiting_of(db, high.id);
  check_reason(w, "retry_backoff", "connection refused");
  BOOST_CHECK(w.has_until);

  // The only node that runs A stops renewing its heartbeat: its lease is in
  // doubt and it has stopped claiming, but it is not dead yet.
  db.exec("UPDATE taskmill.nodes SET heartbeat_at = now() - interval '4.5 seconds'");
  check_reason(waiting_of(db, low.id), "claiming_paused", "n1");
  db.exec("UPDATE taskmill.nodes SET heartbeat_at = now() - interval '6 seconds'");
  check_reason(waiting_of(db, low.id), "no_node_for_type", "type A");
  db.exec("UPDATE taskmill.nodes SET heartbeat_at = now()");

  // A broadcast shard pinned to a node that is down.
  db.exec(
      "INSERT INTO taskmill.nodes (name, incarnation, heartbeat_at) "
      "VALUES ('n2', 'i2', now() - interval '1 minute')");
  auto shard = db.call("submit('A', 'shard-0')");
  db.exec(
      "UPDATE taskmill.tasks SET pinned_node = 'n2', shard_index = 0, shard_total = 2 "
      "WHERE id = " +
      std::to_string(shard.id));
  check_reason(waiting_of(db, shard.id), "pinned_node_down", "pinned to node n2");

  // Finished tasks wait for nothing.
  auto done = db.call("submit('A', 'done')");
  db.exec("UPDATE taskmill.tasks SET status = 'succeeded' WHERE id = " + std::to_string(done.id));
  BOOST_CHECK(waiting_of(db, done.id).reason.empty());
}

BOOST_AUTO_TEST_SUITE_END()

// SPEC §4, a claim inside the submit: a task due at once goes to a node that
// offers permits as the submit commits (storage/sql/offers.sql).
BOOST_AUTO_TEST_SUITE(hand_offs)

namespace {

/// A task's status, node and attempt, read after its submit committed.
std::string state_of(const task_database& db, const std::string& key) {
  return db.scalar(
      "SELECT status || ' ' || coalesce(picked_by, '-') || ' ' || attempt FROM taskmill.tasks "
      "WHERE key = $1",
      {key});
}

/// A node alive by its heartbeat, as a node registers as it starts.
void live_node(const task_database& db, const std::string& name) {
  db.exec("SELECT taskmill.register_node($1, 'i1', '', 60000, NULL)", {name});
}

/// Makes every pending task due later, so that due work does not stop
/// hand-offs.
void put_off_pending(const task_database& db) {
  db.exec(
      "UPDATE taskmill.tasks SET execute_at = now() + interval '1 hour' "
      "WHERE status = 'pending'");
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_task_due_at_once_is_handed_to_a_node_that_offers_permits_as_it_commits) {
  task_database db{"handoff"};
  live_node(db, "a");
  BOOST_REQUIRE_EQUAL(db.scalar("SELECT taskmill.offer_permits('a', NULL, 3, 7, 600000)"), "t");
  auto first = db.call("submit('T', 'k1')");
  BOOST_CHECK_EQUAL(first.outcome, "created");
  BOOST_CHECK_EQUAL(state_of(db, "k1"), "running a 1");
  BOOST_CHECK_EQUAL(db.scalar("SELECT heartbeat_at = started_at AND started_at >= created_at "
                              "FROM taskmill.tasks WHERE key = 'k1'"),
                    "t");
  db.call("submit('T', 'k2')");
  BOOST_CHECK_EQUAL(state_of(db, "k2"), "running a 1");
  // The attempt starts as the transaction commits, however long after the
  // submit: its timeout runs from then.
  auto business = db.connect();
  BOOST_REQUIRE(business.exec("BEGIN"));
  BOOST_CHECK_EQUAL(task_database::call_on(business, "submit('T', 'k3')").status, "pending");
  std::this_thread::sleep_for(std::chrono::milliseconds{300});
  BOOST_REQUIRE(business.exec("COMMIT"));
  BOOST_CHECK_EQUAL(state_of(db, "k3"), "running a 1");
  BOOST_CHECK_EQUAL(db.scalar("SELECT started_at - created_at >= interval '300 ms' "
                              "FROM taskmill.tasks WHERE key = 'k3'"),
                    "t");
  db.call("submit('T', 'k4')");
  BOOST_CHECK_EQUAL(state_of(db, "k4"), "pending - 0");
  // The claim that takes the offer back counts the three as taken.
  BOOST_CHECK_EQUAL(db.scalar("SELECT taskmill.withdraw_offer('a', 3)"), "3");
  // Handed tasks end as claimed ones do, fenced by their attempt.
  BOOST_CHECK(db.complete(first.id, 1, "succeeded"));
  BOOST_CHECK_EQUAL(db.by_id(first.id).status, "succeeded");
}

BOOST_AUTO_TEST_CASE(the_node_handed_a_task_is_notified_with_the_task_as_it_runs) {
  task_database db{"handoffnotify"};
  live_node(db, "node a");
  auto listener = db.connect();
  BOOST_REQUIRE(listener.exec("LISTEN taskmill_handoffs"));
  BOOST_REQUIRE(listener.exec("LISTEN taskmill_tasks"));
  db.exec("SELECT taskmill.offer_permits('node a', '{T}', 2, 42, 600000)");
  // Times are told whatever the submitting session's zone.
  db.exec("SET TimeZone = 'Asia/Kolkata'");
  auto handed = db.call(
      "submit('T', 'k1', payload => '{\"n\": [1, \"\\u00e9\"]}', max_retries => 4, "
      "timeout_ms => 7000, batch => 'b1')");
  // A task too large for a notification is told of by its ids.
  auto large = db.call("submit('T', 'k2', payload => jsonb_build_object('s', repeat('x', 8000)))");
  db.call("submit('T', 'k3')");
  BOOST_REQUIRE(listener.exec("SELECT 1"));
  BOOST_REQUIRE(!listener.consume_input());
  auto got = listener.take_notifications();
  BOOST_REQUIRE_EQUAL(got.size(), 3u);
  BOOST_CHECK_EQUAL(got[0].channel, "taskmill_handoffs");
  BOOST_CHECK_EQUAL(got[0].payload.substr(0, got[0].payload.find('\n')),
                    std::to_string(handed.id) + " 1 42 node a");
  BOOST_CHECK_EQUAL(got[1].payload, std::to_string(large.id) + " 1 42 node a");
  pb::HandOffs heard;
  BOOST_REQUIRE(db::add_if_handed_to("node a", got[0].payload, heard));
  BOOST_REQUIRE(db::add_if_handed_to("node a", got[1].payload, heard));
  BOOST_REQUIRE_EQUAL(heard.hand_offs_size(), 2);
  BOOST_CHECK_EQUAL(heard.hand_offs(1).task().id(), 0);
  BOOST_CHECK_EQUAL(heard.hand_offs(0).generation(), 42);
  // What the node runs is what a claim of the stored task gives.
  const auto& task = heard.hand_offs(0).task();
  auto row = db.exec(
      "SELECT type, key, version, priority, payload::text, attempt, retry_count, max_retries, "
      "timeout_ms, coalesce(batch, ''), trace_id, picked_by, "
      "(extract(epoch FROM execute_at) * 1000000)::bigint, "
      "(extract(epoch FROM started_at) * 1000000)::bigint FROM taskmill.tasks WHERE id = " +
      std::to_string(handed.id));
  BOOST_REQUIRE_EQUAL(row.rows(), 1);
  BOOST_CHECK_EQUAL(task.id(), handed.id);
  BOOST_CHECK_EQUAL(task.type(), row.string(0, 0));
  BOOST_CHECK_EQUAL(task.key(), row.string(0, 1));
  BOOST_CHECK_EQUAL(task.version(), row.int64(0, 2));
  BOOST_CHECK_EQUAL(task.priority(), row.int32(0, 3));
  BOOST_CHECK_EQUAL(task.payload(), row.string(0, 4));
  BOOST_CHECK_EQUAL(task.attempt(), 1);
  BOOST_CHECK_EQUAL(task.attempt(), row.int32(0, 5));
  BOOST_CHECK_EQUAL(task.retry_count(), row.int32(0, 6));
  BOOST_CHECK_EQUAL(task.max_retries(), 4);
  BOOST_CHECK_EQUAL(task.timeout_ms(), 7000);
  BOOST_CHECK_EQUAL(task.batch(), "b1");
  BOOST_CHECK_EQUAL(task.trace_id(), row.string(0, 10));
  BOOST_CHECK_EQUAL(task.picked_by(), "node a");
  BOOST_CHECK_EQUAL(to_micros(task.execute_at()), row.int64(0, 12));
  BOOST_CHECK_EQUAL(to_micros(task.started_at()), row.int64(0, 13));
  // The one not handed off wakes every node.
  BOOST_CHECK_EQUAL(got[2].channel, "taskmill_tasks");
}

BOOST_AUTO_TEST_CASE(nothing_is_handed_past_due_work_or_a_limit_or_beyond_the_offered_types) {
  task_database db{"handoffrules"};
  live_node(db, "a");
  db.exec("SELECT taskmill.offer_permits('a', '{T,L}', 5, 1, 600000)");
  db.call("submit('OTHER', 'k0')");
  BOOST_CHECK_EQUAL(state_of(db, "k0"), "pending - 0");
  // Due work waits (the task just submitted): nothing overtakes it.
  db.call("submit('T', 'k1')");
  BOOST_CHECK_EQUAL(state_of(db, "k1"), "pending - 0");
  put_off_pending(db);
  db.call("submit('T', 'k2', execute_at => now() + interval '1 minute')");
  BOOST_CHECK_EQUAL(state_of(db, "k2"), "pending - 0");
  db.exec(
      "INSERT INTO taskmill.task_types (type, timeout_ms, max_retries, backoff_kind, "
      "backoff_base_ms, backoff_cap_ms, backoff_jitter, running_limit) "
      "VALUES ('L', 5000, 3, 'fixed', 1000, 1000, 0, 3)");
  db.call("submit('L', 'k3')");
  BOOST_CHECK_EQUAL(state_of(db, "k3"), "pending - 0");
  put_off_pending(db);
  // Two in one transaction: the first asked, and the second is due work.
  db.exec("SELECT taskmill.submit('T', 'k4'), taskmill.submit('T', 'k5')");
  BOOST_CHECK_EQUAL(state_of(db, "k4"), "pending - 0");
  BOOST_CHECK_EQUAL(state_of(db, "k5"), "pending - 0");
  put_off_pending(db);
  db.call("submit('T', 'k6')");
  BOOST_CHECK_EQUAL(state_of(db, "k6"), "running a 1");
  BOOST_CHECK_EQUAL(db.scalar("SELECT count(*) FROM taskmill.offer_slots"), "4");
  BOOST_CHECK_EQUAL(db.scalar("SELECT count(*) FROM taskmill.handoff_requests"), "0");
}

BOOST_AUTO_TEST_CASE(a_node_declared_dead_or_stopped_or_started_again_is_handed_nothing) {
  task_database db{"handoffdead"};
  db.exec("SELECT taskmill.register_node('a', 'i1', '', 60000, NULL)");
  db.exec("SELECT taskmill.offer_permits('a', NULL, 3, 1, 600000)");
  db.exec("SELECT taskmill.stop_node('a', 'i1')");
  db.call("submit('T', 'k1')");
  BOOST_CHECK_EQUAL(state_of(db, "k1"), "pending - 0");
  BOOST_CHECK_EQUAL(db.scalar("SELECT taskmill.offer_permits('a', NULL, 3, 2, 600000)"), "f");
  BOOST_CHECK_EQUAL(db.scalar("SELECT count(*) FROM taskmill.offer_slots"), "0");
  put_off_pending(db);

  db.exec("SELECT taskmill.register_node('a', 'i2', '', 60000, NULL)");
  db.exec("SELECT taskmill.offer_permits('a', NULL, 3, 3, 600000)");
  db.exec("SELECT taskmill.register_node('a', 'i3', '', 0, NULL)");
  db.call("submit('T', 'k2')");
  BOOST_CHECK_EQUAL(state_of(db, "k2"), "pending - 0");
  put_off_pending(db);

  db.exec("SELECT taskmill.offer_permits('a', NULL, 3, 4, 600000)");
  db.exec("UPDATE taskmill.nodes SET heartbeat_at = now() - interval '1 hour'");
  db.exec("SELECT taskmill.sweep_lost(1000, 100, " + db.seize_lead() + ")");
  db.call("submit('T', 'k3')");
  BOOST_CHECK_EQUAL(state_of(db, "k3"), "pending - 0");
  BOOST_CHECK_EQUAL(db.scalar("SELECT count(*) FROM taskmill.offers"), "0");
}

// An offer holds while its node beats; a transaction stricter than read
// committed hands nothing off (its commit could fail on a permit taken
// since its snapshot); a task pinned to another node, due, stops nothing; a
// permit of no standing offer is removed by the watcher.
BOOST_AUTO_TEST_CASE(an_offer_holds_while_its_node_beats_for_read_committed_commits) {
  task_database db{"handofflive"};
  live_node(db, "a");
  db.exec("SELECT taskmill.offer_permits('a', NULL, 5, 1, 1000)");
  db.exec("UPDATE taskmill.nodes SET heartbeat_at = now() - interval '2 seconds'");
  db.call("submit('T', 'k1')");
  BOOST_CHECK_EQUAL(state_of(db, "k1"), "pending - 0");
  put_off_pending(db);
  db.exec("UPDATE taskmill.nodes SET heartbeat_at = now()");
  auto business = db.connect();
  BOOST_REQUIRE(business.exec("BEGIN ISOLATION LEVEL REPEATABLE READ"));
  task_database::call_on(business, "submit('T', 'k2')");
  BOOST_REQUIRE(business.exec("COMMIT"));
  BOOST_CHECK_EQUAL(state_of(db, "k2"), "pending - 0");
  put_off_pending(db);
  db.call("submit('T', 'pinned', execute_at => now() + interval '1 hour')");
  db.exec("UPDATE taskmill.tasks SET pinned_node = 'b', execute_at = now() WHERE key = 'pinned'");
  db.call("submit('T', 'k3')");
  BOOST_CHECK_EQUAL(state_of(db, "k3"), "running a 1");
  db.exec("INSERT INTO taskmill.offer_slots (node, generation) VALUES ('a', 99), ('gone', 1)");
  db.exec("SELECT taskmill.sweep_lost(60000, 100, " + db.seize_lead() + ")");
  BOOST_CHECK_EQUAL(db.scalar("SELECT count(*) FROM taskmill.offer_slots"), "4");
  // Taken back with nothing held, as a stopping node does.
  BOOST_CHECK_EQUAL(db.scalar("SELECT taskmill.withdraw_offer('a', 0)"), "0");
  BOOST_CHECK_EQUAL(db.scalar("SELECT count(*) FROM taskmill.offer_slots"), "0");
}

// A transaction that asked to hand a task off keeps nobody waiting while it
// is open: the node takes its offer back at once, with nothing taken, and the
// commit then hands nothing off; a permit added to the offer taken back is
// refused, and a transaction rolled back takes no permit.
BOOST_AUTO_TEST_CASE(an_offer_is_taken_back_without_waiting_for_an_open_transaction) {
  task_database db{"handoffopen"};
  live_node(db, "a");
  db.exec("SELECT taskmill.offer_permits('a', NULL, 2, 5, 600000)");
  auto business = db.connect();
  BOOST_REQUIRE(business.exec("BEGIN"));
  task_database::call_on(business, "submit('T', 'k1')");
  auto node = db.connect();
  BOOST_REQUIRE(node.exec("SET lock_timeout = '2s'"));
  auto taken = node.exec("SELECT taskmill.withdraw_offer('a', 2)");
  BOOST_REQUIRE_MESSAGE(taken, test::describe(taken));
  BOOST_CHECK_EQUAL(taken->string(0, 0), "0");
  auto added = node.exec("SELECT taskmill.add_to_offer('a', 5, 3)");
  BOOST_REQUIRE(added);
  BOOST_CHECK_EQUAL(added->string(0, 0), "f");
  BOOST_REQUIRE(business.exec("COMMIT"));
  BOOST_CHECK_EQUAL(state_of(db, "k1"), "pending - 0");
  put_off_pending(db);
  db.exec("SELECT taskmill.offer_permits('a', NULL, 1, 6, 600000)");
  BOOST_REQUIRE(business.exec("BEGIN"));
  task_database::call_on(business, "submit('T', 'k2')");
  BOOST_REQUIRE(business.exec("ROLLBACK"));
  BOOST_CHECK_EQUAL(db.scalar("SELECT count(*) FROM taskmill.offer_slots"), "1");
  db.call("submit('T', 'k3')");
  BOOST_CHECK_EQUAL(state_of(db, "k3"), "running a 1");
}

// Submitters race a node that offers, adds to and takes back its offers, on
// connections of their own, some transactions rolled back: every permit a
// commit took is counted by the take-back that follows, no task is handed
// off beyond what was offered, and none is lost.
BOOST_AUTO_TEST_CASE(racing_submits_take_no_more_than_the_offers_and_each_is_counted) {
  task_database db{"handoffrace"};
  live_node(db, "a");
  constexpr int submitters = 4;
  constexpr int per_submitter = 150;
  std::atomic<bool> done{false};
  std::atomic<int> committed{0};
  std::atomic<int> errors{0};
  std::vector<std::thread> threads;
  for (int w = 0; w < submitters; ++w) {
    threads.emplace_back([&, w] {
      auto conn = db.connect();
      std::mt19937 rng(w);
      for (int i = 0; i < per_submitter; ++i) {
        bool roll_back = rng() % 5 == 0;
        if (!conn.exec("BEGIN")) ++errors;
        auto key = "w" + std::to_string(w) + "-" + std::to_string(i);
        auto row = task_database::call_on(conn, "submit('T', '" + key + "')");
        if (!conn.exec(roll_back ? "ROLLBACK" : "COMMIT")) ++errors;
        if (roll_back) continue;
        ++committed;
        // Not due any more if not handed off, so that due work does not stop
        // hand-offs.
        if (!conn.exec("UPDATE taskmill.tasks SET execute_at = now() + interval '1 hour' "
                       "WHERE status = 'pending' AND id = " +
                       std::to_string(row.id)))
          ++errors;
      }
    });
  }
  int64_t offered = 0;
  int64_t counted = 0;
  std::thread node([&] {
    auto conn = db.connect();
    std::mt19937 rng(99);
    int64_t generation = 0;
    int64_t held = 0;
    auto withdraw = [&] {
      auto taken = conn.exec("SELECT taskmill.withdraw_offer('a', " + std::to_string(held) + ")");
      if (!taken) return ++errors, void();
      counted += taken->int64(0, 0);
      held = 0;
    };
    while (!done) {
      withdraw();
      auto n = static_cast<int>(rng() % 8) + 1;
      if (!conn.exec("SELECT taskmill.offer_permits('a', NULL, " + std::to_string(n) + ", " +
                     std::to_string(++generation) + ", 600000)")) {
        ++errors;
        continue;
      }
      offered += n;
      held = n;
      if (rng() % 2 == 0) {
        auto more =
            conn.exec("SELECT taskmill.add_to_offer('a', " + std::to_string(generation) + ", 3)");
        if (more && more->boolean(0, 0)) {
          offered += 3;
          held += 3;
        }
      }
      std::this_thread::sleep_for(std::chrono::microseconds{rng() % 2000});
    }
    withdraw();
  });
  for (auto& t : threads) t.join();
  done = true;
  node.join();
  BOOST_CHECK_EQUAL(errors.load(), 0);
  auto handed =
      std::stoll(db.scalar("SELECT count(*) FROM taskmill.tasks WHERE status = 'running'"));
  BOOST_TEST_MESSAGE("handed off " << handed << " of " << offered << " offered");
  BOOST_CHECK_GT(handed, 0);
  BOOST_CHECK_EQUAL(counted, handed);
  BOOST_CHECK_LE(handed, offered);
  BOOST_CHECK_EQUAL(db.scalar("SELECT count(*) FROM taskmill.tasks WHERE status = 'running' "
                              "AND (picked_by <> 'a' OR attempt <> 1)"),
                    "0");
  BOOST_CHECK_EQUAL(db.scalar("SELECT count(*) FROM taskmill.tasks"),
                    std::to_string(committed.load()));
  BOOST_CHECK_EQUAL(db.scalar("SELECT count(*) FROM taskmill.handoff_requests"), "0");
}

BOOST_AUTO_TEST_SUITE_END()
