// Nodes as actor systems in this process, on a real PostgreSQL: the pusher,
// limiter, dispatcher and inserter together.
#define BOOST_TEST_MODULE node
#include <boost/test/unit_test.hpp>

#include "actors/metrics/node_metrics.hpp"
#include "actors/supervisor.hpp"
#include "messages/errors.hpp"
#include "tests/support/claim_races.hpp"
#include "tests/support/nodes.hpp"
#include "tools/http_fetch.hpp"
#include "tools/node/node.hpp"

#include <caf/send.hpp>

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdlib>
#include <deque>
#include <set>
#include <sstream>
#include <thread>

using namespace taskmill;
using namespace std::chrono_literals;

namespace {

using test::test_node_config;

/// `cfg` runs `name` too: the sleep executor's type, with at most `limit` of
/// its tasks running cluster-wide.
void add_limited_sleep(config& cfg, const std::string& name, int limit) {
  auto limited = cfg.types.at("SLEEP");
  limited.name = name;
  limited.running_limit = limit;
  cfg.types[name] = limited;
}

struct node_fixture : test::nodes_fixture {
  node_fixture() : nodes_fixture("node") {}

  int64_t count(const std::string& where) const {
    return std::stoll(db.scalar("SELECT count(*) FROM taskmill.tasks WHERE " + where));
  }

  /// Round trips of `node`'s claims' storage so far: claims and reads of the
  /// next due time.
  int64_t claim_round_trips(const node_actors& node) {
    auto status = test::ask<pb::StorageStatus>(*sys, node.claim_storage, status_atom_v);
    BOOST_REQUIRE(status);
    return status->round_trips();
  }

  /// The most each of the `columns` columns of `counts` (one row of counts)
  /// showed, sampled on a connection of its own while the nodes work, until
  /// `tasks` tasks succeeded (60 s at most).
  std::vector<int64_t> most_until_succeeded(const std::string& counts, int columns,
                                            int tasks) const {
    std::vector<int64_t> most(columns);
    int samples = 0;
    auto watcher = db.connect();
    BOOST_REQUIRE(test::eventually(
        [&] {
          auto res = watcher.exec(
              "SELECT (SELECT count(*) FROM taskmill.tasks WHERE status = "
              "'succeeded'), c.* FROM (" +
              counts + ") c");
          BOOST_REQUIRE(res);
          ++samples;
          for (int i = 0; i < columns; ++i)
            most[i] = std::max<int64_t>(most[i], res->int64(0, i + 1));
          return res->int64(0, 0) == tasks;
        },
        60s));
    BOOST_TEST_MESSAGE(samples << " samples while the nodes worked");
    return most;
  }
};

pb::SubmitTasks tasks_of(const std::string& type, int from, int n, int priorities = 1) {
  pb::SubmitTasks req;
  for (int i = from; i < from + n; ++i) {
    auto t = req.add_tasks();
    t->set_type(type);
    t->set_key(std::to_string(i));
    t->set_priority(1 + i % priorities);
  }
  return req;
}

}  // namespace

BOOST_FIXTURE_TEST_SUITE(single_node, node_fixture)

BOOST_AUTO_TEST_CASE(submitted_tasks_run_once_and_succeed) {
  auto& node = start(test_node_config("n1"));
  for (int batch = 0; batch < 4; ++batch) {
    auto res = test::ask<pb::SubmitResults>(*sys, node.inserter, submit_atom_v,
                                            tasks_of("NOOP", batch * 500, 500, 5));
    BOOST_REQUIRE_MESSAGE(res, test::describe(res));
    BOOST_REQUIRE_EQUAL(res->results_size(), 500);
    BOOST_CHECK_EQUAL(res->results(0).outcome(), pb::CREATED);
  }
  BOOST_REQUIRE(test::eventually([&] { return count("status = 'succeeded'") == 2000; }, 30s));
  BOOST_CHECK_EQUAL(count("attempt <> 1 OR picked_by <> 'n1'"), 0);
  BOOST_CHECK_EQUAL(
      db.scalar("SELECT count(*) FROM taskmill.attempt_history WHERE outcome = 'succeeded'"),
      "2000");
  // Every permit came back once the outcomes were stored.
  BOOST_CHECK(test::eventually([&] {
    auto in_flight = test::in_flight(*sys, node.limiter);
    return in_flight && *in_flight == 0;
  }));
}

// A long-lived node meets every task type there is: past metric_names_limit
// types, the others' tasks are counted together under one "(other)" series,
// so a flood of types cannot grow its metrics (and memory) without bound,
// and none of their outcomes goes uncounted.
BOOST_AUTO_TEST_CASE(a_flood_of_task_types_shares_one_other_series) {
  auto cfg = test_node_config("n1");
  cfg.default_type.executor = executor_kind::noop;
  auto& node = start(cfg);
  constexpr int types = 3 * static_cast<int>(metric_names_limit);
  pb::SubmitTasks req;
  for (int i = 0; i < types; ++i) {
    auto* t = req.add_tasks();
    t->set_type("FLOOD" + std::to_string(i));
    t->set_key("k");
  }
  auto res = test::ask<pb::SubmitResults>(*sys, node.inserter, submit_atom_v, req);
  BOOST_REQUIRE_MESSAGE(res, test::describe(res));
  BOOST_REQUIRE(test::eventually([&] { return count("status = 'succeeded'") == types; }, 30s));
  auto metrics = http_fetch("GET", api_url(node) + "/metrics");
  BOOST_REQUIRE(metrics);
  std::set<std::string> labels;
  double succeeded = 0;
  std::istringstream lines{metrics->body};
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("taskmill_task_outcomes_total{", 0) != 0) continue;
    auto from = line.find("type=\"") + 6;
    labels.insert(line.substr(from, line.find('"', from) - from));
    if (line.find("outcome=\"succeeded\"") != std::string::npos)
      succeeded += std::stod(line.substr(line.rfind(' ') + 1));
  }
  BOOST_TEST_MESSAGE(labels.size() << " type labels in /metrics");
  BOOST_CHECK_LE(labels.size(), metric_names_limit + 1);
  BOOST_CHECK(labels.count(other_names_label));
  BOOST_CHECK_EQUAL(succeeded, types);
}

BOOST_AUTO_TEST_CASE(executions_past_their_timeout_are_failed_attempts) {
  auto& node = start(test_node_config("n1"));
  pb::SubmitTasks req;
  auto quick = req.add_tasks();
  quick->set_type("SLEEP");
  quick->set_key("quick");
  quick->set_payload("{\"ms\": 20}");
  auto slow = req.add_tasks();
  slow->set_type("SLEEP");
  slow->set_key("slow");
  slow->set_payload("5000");
  slow->set_timeout_ms(100);
  slow->set_max_retries(1);
  auto broken = req.add_tasks();
  broken->set_type("FAIL");
  broken->set_key("broken");
  BOOST_REQUIRE(test::ask<pb::SubmitResults>(*sys, node.inserter, submit_atom_v, req));
  BOOST_REQUIRE(
      test::eventually([&] { return count("status IN ('succeeded', 'dead')") == 3; }, 20s));
  BOOST_CHECK_EQUAL(count("key = 'quick' AND status = 'succeeded'"), 1);
  BOOST_CHECK_EQUAL(
      count("key = 'slow' AND status = 'dead' AND attempt = 2 AND error = 'timed out'"), 1);
  BOOST_CHECK_EQUAL(count("key = 'broken' AND status = 'dead' AND attempt = 1"), 1);
}

BOOST_AUTO_TEST_CASE(the_node_limit_caps_tasks_in_flight) {
  auto cfg = test_node_config("n1");
  cfg.scheduling.node_limit = 3;
  cfg.scheduling.poll_interval = 60s;  // freed permits, not polls, bring the rest
  auto& node = start(cfg);
  pb::SubmitTasks req = tasks_of("SLEEP", 0, 12);
  for (auto& t : *req.mutable_tasks()) t.set_payload("150");
  BOOST_REQUIRE(test::ask<pb::SubmitResults>(*sys, node.inserter, submit_atom_v, req));
  int64_t most = 0;
  BOOST_REQUIRE(test::eventually(
      [&] {
        most = std::max(most, count("status = 'running'"));
        return count("status = 'succeeded'") == 12;
      },
      20s));
  BOOST_CHECK_LE(most, 3);
  BOOST_CHECK_GE(most, 2);
}

BOOST_AUTO_TEST_CASE(a_permit_is_held_until_the_outcome_is_stored) {
  auto cfg = test_node_config("n1");
  cfg.scheduling.node_limit = 1;
  auto& node = start(cfg);
  db.exec("SELECT taskmill.submit('SLEEP', 'first', payload => '800')");
  BOOST_REQUIRE(
      test::eventually([&] { return count("key = 'first' AND status = 'running'") == 1; }));
  // Holding the task's row keeps its outcome from being stored.
  auto holder = db.connect();
  BOOST_REQUIRE(holder.exec("BEGIN"));
  BOOST_REQUIRE(holder.exec("SELECT 1 FROM taskmill.tasks WHERE key = 'first' FOR UPDATE"));
  db.exec("SELECT taskmill.submit('NOOP', 'second')");
  std::this_thread::sleep_for(1500ms);  // the sleep is over, its outcome waits
  BOOST_CHECK_EQUAL(count("key = 'first' AND status = 'running'"), 1);
  BOOST_CHECK_EQUAL(count("key = 'second' AND status = 'pending'"), 1);
  auto in_flight = test::in_flight(*sys, node.limiter);
  BOOST_CHECK(in_flight && *in_flight == 1);
  BOOST_REQUIRE(holder.exec("ROLLBACK"));
  BOOST_CHECK(test::eventually([&] { return count("status = 'succeeded'") == 2; }));
  BOOST_CHECK_EQUAL(
      db.scalar("SELECT bool_and(s.started_at >= f.updated_at)::text FROM taskmill.tasks s, "
                "taskmill.tasks f WHERE s.key = 'second' AND f.key = 'first'"),
      "true");
}

// A node whose every type has a cluster-wide limit claims no more than the
// limits leave beside its own tasks in flight: a claim past them would come
// back empty, and so would the read of the next due time after it, each a
// round trip on the claims' connection ahead of the claim that finds room.
BOOST_AUTO_TEST_CASE(a_node_at_its_types_limits_waits_for_a_release_before_it_claims) {
  auto cfg = test_node_config("n1");
  add_limited_sleep(cfg, "CAPPED_A", 3);
  add_limited_sleep(cfg, "CAPPED_B", 3);
  std::erase_if(cfg.types, [](const auto& type) { return type.second.running_limit == 0; });
  auto& node = start(cfg);
  std::this_thread::sleep_for(300ms);
  auto before = claim_round_trips(node);
  db.exec(
      "SELECT count(taskmill.submit(CASE WHEN k % 2 = 0 THEN 'CAPPED_A' ELSE 'CAPPED_B' END, "
      "k::text, payload => '30')) FROM generate_series(1, 80) k");
  auto most = most_until_succeeded(
      "SELECT count(*) FILTER (WHERE type = 'CAPPED_A'), count(*) FILTER (WHERE type = "
      "'CAPPED_B') FROM taskmill.tasks WHERE status = 'running'",
      2, 80);
  auto trips = claim_round_trips(node) - before;
  auto claims_that_took =
      std::stoll(db.scalar("SELECT count(DISTINCT started_at) FROM taskmill.tasks"));
  BOOST_TEST_MESSAGE(trips << " round trips to claim, " << claims_that_took
                           << " claims that took tasks");
  BOOST_CHECK_LE(most[0], 3);
  BOOST_CHECK_LE(most[1], 3);
  BOOST_CHECK_EQUAL(count("attempt <> 1"), 0);
  // Those that took tasks, and some that found the end of the work or a
  // type's tasks at its limit (five times as many before).
  BOOST_CHECK_LE(trips, claims_that_took * 3 / 2 + 6);
}

// A type held at its limit with tasks just come due, beside types without
// limits: each claim comes back empty and the next due time says work is
// due. The node tries again less and less often (5 ms, then doubling), not
// every 5 ms: two round trips each time.
BOOST_AUTO_TEST_CASE(a_type_held_at_its_limit_is_not_claimed_every_few_milliseconds) {
  auto cfg = test_node_config("n1");
  add_limited_sleep(cfg, "CAPPED", 1);
  auto& node = start(cfg);
  db.exec(
      "SELECT count(taskmill.submit('CAPPED', k::text, payload => '3000')) "
      "FROM generate_series(1, 5) k");
  BOOST_REQUIRE(test::eventually([&] { return count("status = 'running'") == 1; }));
  auto before = claim_round_trips(node);
  std::this_thread::sleep_for(700ms);
  auto trips = claim_round_trips(node) - before;
  BOOST_TEST_MESSAGE(trips << " round trips to claim in 700 ms");
  BOOST_CHECK_LE(trips, 30);
  BOOST_CHECK_EQUAL(count("status = 'running'"), 1);
}

// Beside a type held at its limit while its tasks come due, whose claims
// the node tries less and less often, a task of another type still starts
// at its time: the pause never runs past the next due time (SPEC §1: each
// task runs at its time).
BOOST_AUTO_TEST_CASE(a_task_due_beside_a_type_held_at_its_limit_starts_at_its_time) {
  auto cfg = test_node_config("n1");
  cfg.scheduling.poll_interval = 10s;  // the next due time, not polling, must wake it
  add_limited_sleep(cfg, "CAPPED", 1);
  start(cfg);
  db.exec(
      "SELECT count(taskmill.submit('CAPPED', k::text, payload => '5000')) "
      "FROM generate_series(1, 3) k");
  BOOST_REQUIRE(test::eventually([&] { return count("status = 'running'") == 1; }));
  db.exec(
      "SELECT count(taskmill.submit('CAPPED', 'more' || k, payload => '5000')) "
      "FROM generate_series(1, 3) k");
  db.exec("SELECT taskmill.submit('NOOP', 'later', execute_at => now() + interval '350 ms')");
  BOOST_REQUIRE(
      test::eventually([&] { return count("key = 'later' AND status = 'succeeded'") == 1; }, 5s));
  auto late_ms = std::stod(
      db.scalar("SELECT extract(epoch from started_at - execute_at) * 1000 FROM taskmill.tasks "
                "WHERE key = 'later'"));
  BOOST_TEST_MESSAGE("started " << late_ms << " ms after its time");
  BOOST_CHECK_GE(late_ms, 0);
  BOOST_CHECK_LE(late_ms, 150);
}

BOOST_AUTO_TEST_CASE(claims_do_not_wait_behind_a_heartbeat) {
  auto cfg = test_node_config("n1");
  // The heartbeat waits on the lock below for as long as it is held.
  cfg.database.lock_timeout = 10s;
  start(cfg);
  auto holder = db.connect();
  BOOST_REQUIRE(holder.exec("BEGIN"));
  BOOST_REQUIRE(holder.exec("SELECT 1 FROM taskmill.nodes WHERE name = 'n1' FOR UPDATE"));
  auto heartbeats_waiting = [&] {
    return std::stoll(
        db.scalar("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                  "AND query LIKE '%taskmill.heartbeat%'"));
  };
  BOOST_REQUIRE(test::eventually([&] { return heartbeats_waiting() == 1; }, 5s));
  db.exec("SELECT taskmill.submit('NOOP', 'beside-a-stuck-heartbeat')");
  BOOST_CHECK(test::eventually([&] { return count("status = 'succeeded'") == 1; }, 1500ms));
  BOOST_CHECK_EQUAL(heartbeats_waiting(), 1);
  BOOST_REQUIRE(holder.exec("ROLLBACK"));
}

BOOST_AUTO_TEST_CASE(claimed_tasks_run_even_when_the_next_due_time_cannot_be_read) {
  auto cfg = test_node_config("n1");
  cfg.scheduling.poll_interval = 200ms;
  start(cfg);
  // The claim commits before the statement after it fails.
  db.exec("DROP FUNCTION taskmill.next_due(text[], bigint, text)");
  db.exec("SELECT count(taskmill.submit('NOOP', k::text)) FROM generate_series(1, 20) k");
  BOOST_CHECK(test::eventually([&] { return count("status = 'succeeded'") == 20; }, 10s));
  BOOST_CHECK_EQUAL(count("status = 'running'"), 0);
}

BOOST_AUTO_TEST_CASE(a_task_for_later_starts_at_its_time) {
  auto cfg = test_node_config("n1");
  cfg.scheduling.poll_interval = 10s;  // the next-due timer, not polling, must wake it
  start(cfg);
  db.exec("SELECT taskmill.submit('NOOP', 'later', execute_at => now() + interval '1500 ms')");
  BOOST_REQUIRE(test::eventually([&] { return count("status = 'succeeded'") == 1; }, 10s));
  auto late_ms = std::stod(
      db.scalar("SELECT extract(epoch from started_at - execute_at) * 1000 FROM taskmill.tasks"));
  BOOST_TEST_MESSAGE("started " << late_ms << " ms after its time");
  BOOST_CHECK_GE(late_ms, 0);
  BOOST_CHECK_LE(late_ms, 300);
}

BOOST_AUTO_TEST_CASE(types_without_an_executor_are_left_to_other_nodes) {
  auto& node = start(test_node_config("n1"));
  db.exec("SELECT taskmill.submit('ELSEWHERE', 'x')");
  BOOST_REQUIRE(
      test::ask<pb::SubmitResults>(*sys, node.inserter, submit_atom_v, tasks_of("NOOP", 0, 10)));
  BOOST_REQUIRE(test::eventually([&] { return count("status = 'succeeded'") == 10; }));
  std::this_thread::sleep_for(300ms);
  BOOST_CHECK_EQUAL(count("type = 'ELSEWHERE' AND status = 'pending' AND attempt = 0"), 1);
}

BOOST_AUTO_TEST_CASE(bad_submissions_are_refused_whole_naming_the_field) {
  auto& node = start(test_node_config("n1"));
  auto req = tasks_of("NOOP", 0, 3);
  req.mutable_tasks(1)->set_priority(7);
  auto res = test::ask<pb::SubmitResults>(*sys, node.inserter, submit_atom_v, req);
  BOOST_REQUIRE(!res);
  BOOST_CHECK(is(res.error(), errc::invalid_argument));
  BOOST_CHECK_EQUAL(error_message(res.error()),
                    "tasks[1].priority must be between 1 and 5 (got 7)");
  auto bad_json = tasks_of("NOOP", 0, 1);
  bad_json.mutable_tasks(0)->set_payload("{not json");
  auto json_res = test::ask<pb::SubmitResults>(*sys, node.inserter, submit_atom_v, bad_json);
  BOOST_REQUIRE(!json_res);
  BOOST_CHECK_EQUAL(error_message(json_res.error()), "payload is not valid JSON (at byte 3)");
  auto huge = tasks_of("NOOP", 0, 1);
  huge.mutable_tasks(0)->set_payload("\"" + std::string(2 << 20, 'x') + "\"");
  auto huge_res = test::ask<pb::SubmitResults>(*sys, node.inserter, submit_atom_v, huge);
  BOOST_REQUIRE(!huge_res);
  BOOST_CHECK(is(huge_res.error(), errc::payload_too_large));
  pb::RescheduleRequest no_time;
  no_time.set_type("NOOP");
  no_time.set_key("1");
  auto resched = test::ask<pb::RescheduleResult>(*sys, node.inserter, reschedule_atom_v, no_time);
  BOOST_REQUIRE(!resched);
  BOOST_CHECK_EQUAL(error_message(resched.error()), "execute_at is required");
  BOOST_CHECK_EQUAL(count("true"), 0);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_FIXTURE_TEST_SUITE(cluster, node_fixture)

BOOST_AUTO_TEST_CASE(several_nodes_share_the_work_and_run_each_task_once) {
  for (int i = 1; i <= 3; ++i) start(test_node_config("n" + std::to_string(i)));
  constexpr int n = 6000;
  db.exec(
      "SELECT count(taskmill.submit('NOOP', k::text, priority => 1 + k % 5)) FROM "
      "generate_series(1, " +
      std::to_string(n) + ") k");
  BOOST_REQUIRE(test::eventually([&] { return count("status = 'succeeded'") == n; }, 60s));
  BOOST_CHECK_EQUAL(count("attempt <> 1"), 0);
  BOOST_CHECK_EQUAL(db.scalar("SELECT count(*) FROM taskmill.attempt_history"), std::to_string(n));
  auto nodes_used = std::stoi(db.scalar("SELECT count(DISTINCT picked_by) FROM taskmill.tasks"));
  BOOST_TEST_MESSAGE(nodes_used << " nodes ran tasks");
  BOOST_CHECK_GE(nodes_used, 2);
}

BOOST_AUTO_TEST_CASE(retries_move_between_nodes_without_double_runs) {
  for (int i = 1; i <= 3; ++i) start(test_node_config("n" + std::to_string(i)));
  constexpr int n = 600;
  // Every attempt times out: each task runs max_retries + 1 times, then is dead.
  db.exec(
      "SELECT count(taskmill.submit('SLEEP', k::text, payload => '200', timeout_ms => 20, "
      "max_retries => 2, backoff_kind => 'fixed', backoff_base_ms => 5, backoff_jitter => 0)) "
      "FROM generate_series(1, " +
      std::to_string(n) + ") k");
  BOOST_REQUIRE(test::eventually([&] { return count("status = 'dead'") == n; }, 60s));
  BOOST_CHECK_EQUAL(count("attempt <> 3 OR retry_count <> 3"), 0);
  BOOST_CHECK_EQUAL(db.scalar("SELECT count(*) FROM taskmill.attempts WHERE outcome = 'retry'"),
                    std::to_string(3 * n));
}

BOOST_AUTO_TEST_CASE(limits_hold_across_nodes_claiming_at_once) {
  for (int i = 1; i <= 3; ++i) {
    auto cfg = test_node_config("n" + std::to_string(i));
    cfg.scheduling.global_limit = 6;
    cfg.scheduling.batch_size = 4;
    add_limited_sleep(cfg, "CAPPED", 2);
    start(cfg);
  }
  db.exec(
      "SELECT count(taskmill.submit(CASE WHEN k % 3 = 0 THEN 'CAPPED' ELSE 'SLEEP' END, k::text, "
      "payload => '40')) FROM generate_series(1, 240) k");
  auto seen = most_until_succeeded(
      "SELECT count(*), count(*) FILTER (WHERE type = 'CAPPED') FROM taskmill.tasks "
      "WHERE status = 'running'",
      2, 240);
  auto most = seen[0], most_capped = seen[1];
  BOOST_TEST_MESSAGE("at most " << most << " running, " << most_capped << " of the capped type");
  BOOST_CHECK_LE(most, 6);
  BOOST_CHECK_GE(most, 4);
  BOOST_CHECK_LE(most_capped, 2);
  BOOST_CHECK_EQUAL(count("attempt <> 1"), 0);
  auto nodes_used = std::stoi(db.scalar("SELECT count(DISTINCT picked_by) FROM taskmill.tasks"));
  BOOST_CHECK_GE(nodes_used, 2);
}

/// Type `name` in `cfg`, run as type `like` is, keyed in space `space` by
/// payload path `path`; answers the space, to be given its limits.
key_space_config& add_keyed_type(config& cfg, const std::string& name, const std::string& like,
                                 const std::string& space, const std::string& path) {
  auto keyed = cfg.types.at(like);
  keyed.name = name;
  keyed.key_space = space;
  keyed.key_path = path;
  cfg.types[name] = keyed;
  auto& out = cfg.key_spaces[space];
  out.name = space;
  return out;
}

// Keyed limits from the nodes' configs (SPEC §4 Keyed limits): five nodes
// drain 200 tenants' tasks; no tenant ever runs more than its limit (checked
// at every commit that starts one, and sampled), and the small tenants are
// not left behind the big one's backlog.
BOOST_AUTO_TEST_CASE(keys_hold_across_nodes_claiming_at_once) {
  test::races::check_key_limits_at_commit(db);
  for (int i = 1; i <= 5; ++i) {
    auto cfg = test_node_config("n" + std::to_string(i));
    cfg.scheduling.batch_size = 8;
    auto& tenants = add_keyed_type(cfg, "KEYED", "SLEEP", "tenants", "$.tenant");
    tenants.limit = 2;
    tenants.keys = {{"big", 3}};
    start(cfg);
  }
  // The big tenant's 90 tasks are all older than the 199 others' 4 each.
  db.exec(
      "SELECT count(taskmill.submit('KEYED', 'big-' || k, payload => '{\"tenant\": \"big\", "
      "\"ms\": 30}')) FROM generate_series(1, 90) k");
  db.exec(
      "SELECT count(taskmill.submit('KEYED', 's' || t || '-' || k, payload => "
      "jsonb_build_object('tenant', 's' || t, 'ms', 30))) FROM generate_series(1, 4) k, "
      "generate_series(1, 199) t");
  auto seen = most_until_succeeded(
      "SELECT coalesce(max(n) FILTER (WHERE k = 'big'), 0), coalesce(max(n) FILTER (WHERE k "
      "<> 'big'), 0) FROM (SELECT concurrency_key AS k, count(*) AS n FROM taskmill.tasks "
      "WHERE status = 'running' GROUP BY 1) r",
      2, 90 + 4 * 199);
  auto most_big = seen[0], most_small = seen[1];
  BOOST_TEST_MESSAGE("at most " << most_big << " of the big tenant running, " << most_small
                                << " of a small one");
  BOOST_CHECK_LE(most_big, 3);
  BOOST_CHECK_LE(most_small, 2);
  BOOST_CHECK_EQUAL(test::races::key_limits_passed(db), 0);
  BOOST_CHECK_EQUAL(count("attempt <> 1"), 0);
  // Served in turns: the small tenants' last task started long before the
  // big tenant's last (at 3 running it needs 90 / 3 rounds of 30 ms).
  BOOST_CHECK_EQUAL(
      db.scalar("SELECT (SELECT max(started_at) FROM taskmill.tasks "
                "WHERE concurrency_key <> 'big') < (SELECT max(started_at) - "
                "interval '200 ms' FROM taskmill.tasks WHERE concurrency_key = 'big')"),
      "t");
}

// A key's rate from the nodes' configs: three nodes, 50 starts a second on
// one key, 2,000 due tasks: no window of a second holds more than 50 starts,
// and the nodes start at least 90% of the rate, each opening of the rate
// found without waiting for a poll.
BOOST_AUTO_TEST_CASE(a_keys_rate_holds_across_nodes_claiming_at_once) {
  for (int i = 1; i <= 3; ++i) {
    auto cfg = test_node_config("n" + std::to_string(i));
    cfg.scheduling.poll_interval = 5s;
    auto& api = add_keyed_type(cfg, "RATED", "NOOP", "api", "$.account");
    api.limit = 1000;
    api.rate = 50;
    api.period = 1s;
    start(cfg);
  }
  db.exec(
      "SELECT count(taskmill.submit('RATED', 'r-' || k, payload => '{\"account\": \"acme\"}')) "
      "FROM generate_series(1, 2000) k");
  BOOST_REQUIRE(test::eventually([&] { return count("started_at IS NOT NULL") >= 260; }, 20s));
  auto starts = db.exec(
      "WITH s AS (SELECT started_at FROM taskmill.tasks WHERE started_at IS NOT NULL), "
      "first AS (SELECT min(started_at) AS t0 FROM s), "
      "early AS (SELECT s.started_at FROM s, first WHERE s.started_at < first.t0 + interval '5 "
      "s') "
      "SELECT (SELECT max((SELECT count(*) FROM s b WHERE b.started_at >= a.started_at AND "
      "b.started_at < a.started_at + interval '1 s')) FROM s a), "
      "(SELECT (count(*) - 50) / extract(epoch FROM max(e.started_at) - min(e.started_at)) "
      "FROM early e)");
  auto most_in_a_second = starts.int64(0, 0);
  auto rate = std::stod(starts.string(0, 1));
  BOOST_TEST_MESSAGE("at most " << most_in_a_second << " starts in a second; " << rate
                                << " a second after the first 50");
  BOOST_CHECK_LE(most_in_a_second, 50);
  BOOST_CHECK_GE(rate, 45.0);
  BOOST_CHECK_EQUAL(count("attempt > 1"), 0);
}

BOOST_AUTO_TEST_CASE(notifications_wake_idle_nodes_long_before_their_poll) {
  auto cfg = test_node_config("listener");
  cfg.scheduling.poll_interval = 20s;
  start(cfg);
  for (int i = 0; i < 5; ++i) {
    std::this_thread::sleep_for(300ms);  // idle: waiting for a poll 20 s away
    db.exec("SELECT taskmill.submit('NOOP', $1)", {"wake-" + std::to_string(i)});
  }
  BOOST_REQUIRE(test::eventually([&] { return count("status = 'succeeded'") == 5; }, 5s));
  auto slowest_ms = std::stod(db.scalar(
      "SELECT max(extract(epoch from started_at - created_at)) * 1000 FROM taskmill.tasks"));
  BOOST_TEST_MESSAGE("slowest pickup after a commit: " << slowest_ms << " ms");
  BOOST_CHECK_LE(slowest_ms, 1000);
}

BOOST_AUTO_TEST_CASE(poll_only_nodes_find_work_without_notifications) {
  auto cfg = test_node_config("poller");
  cfg.database.listen = false;
  cfg.scheduling.poll_interval = 300ms;
  start(cfg);
  std::this_thread::sleep_for(500ms);
  db.exec("SELECT taskmill.submit('NOOP', 'from-sql')");
  BOOST_CHECK(test::eventually([&] { return count("status = 'succeeded'") == 1; }, 5s));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_FIXTURE_TEST_SUITE(supervision, node_fixture)

/// Each actor of a node, by the name the supervisor reports.
std::vector<std::pair<std::string, caf::actor>> actors_of(const node_actors& n) {
  auto untyped = [](const auto& handle) { return caf::actor_cast<caf::actor>(handle); };
  return {{"storage", untyped(n.storage)},
          {"submit storage", untyped(n.submit_storage)},
          {"claim storage", untyped(n.claim_storage)},
          {"outcome storage", untyped(n.outcome_storage)},
          {"lease storage", untyped(n.lease_storage)},
          {"limiter", untyped(n.limiter)},
          {"dispatcher", untyped(n.dispatcher)},
          {"pusher", untyped(n.pusher)},
          {"inserter", untyped(n.inserter)},
          {"watcher", untyped(n.watcher)},
          {"reconciler", untyped(n.reconciler)},
          {"cluster", untyped(n.cluster)},
          {"readiness", untyped(n.readiness)},
          {"api", untyped(n.api)}};
}

BOOST_AUTO_TEST_CASE(a_node_whose_actor_dies_fails_instead_of_living_on_half_alive) {
  auto names = actors_of(start(test_node_config("probe")));
  stop_nodes();
  for (size_t i = 0; i < names.size(); ++i) {
    const auto& name = names[i].first;
    BOOST_TEST_CONTEXT("killing the " << name) {
      auto& node = start(test_node_config("n" + std::to_string(i)));
      auto url = api_url(node);
      BOOST_REQUIRE_EQUAL(http_fetch("GET", url + "/readyz")->status, 200);
      BOOST_CHECK(!node.health->failed());
      caf::anon_send_exit(actors_of(node)[i].second, caf::exit_reason::kill);
      BOOST_REQUIRE(node.health->wait_for_failure(5s));
      BOOST_CHECK_MESSAGE(node.health->failure().find("the " + name + " actor ended") == 0,
                          node.health->failure());
      if (name != "api") {
        // Until whoever runs the node stops it, it does not claim to be ready.
        auto ready = http_fetch("GET", url + "/readyz");
        BOOST_REQUIRE(ready);
        BOOST_CHECK_EQUAL(ready->status, 503);
        BOOST_CHECK_MESSAGE(ready->body.find(name) != std::string::npos, ready->body);
      }
      auto started = std::chrono::steady_clock::now();
      stop_nodes();
      BOOST_CHECK(std::chrono::steady_clock::now() - started < 10s);
    }
  }
}

BOOST_AUTO_TEST_CASE(a_running_node_stops_with_status_1_when_an_actor_dies) {
  auto& node = start(test_node_config("n1"));
  caf::anon_send_exit(node.dispatcher, caf::exit_reason::kill);
  auto started = std::chrono::steady_clock::now();
  int asked = 0;
  auto status = run_until_stopped(*sys, node, [&] {
    std::this_thread::sleep_for(10ms);
    return ++asked > 1000;
  });
  BOOST_CHECK_EQUAL(status, 1);
  BOOST_CHECK(std::chrono::steady_clock::now() - started < 5s);
  BOOST_CHECK(!node.pusher);
}

BOOST_AUTO_TEST_CASE(a_node_asked_to_stop_stops_with_status_0) {
  auto& node = start(test_node_config("n1"));
  auto health = node.health;
  int asked = 0;
  BOOST_CHECK_EQUAL(run_until_stopped(*sys, node, [&] { return ++asked > 3; }), 0);
  BOOST_CHECK(!health->failed());
}

BOOST_AUTO_TEST_SUITE_END()

namespace {

/// A service manager's end of the notify protocol (sd_notify(3)): a
/// datagram socket named by $NOTIFY_SOCKET, with $WATCHDOG_USEC and
/// $WATCHDOG_PID for this process, all unset again at the end.
class service_manager {
 public:
  explicit service_manager(std::chrono::microseconds watchdog)
      : path_{"/tmp/taskmill-notify-" + std::to_string(getpid()) + ".sock"} {
    fd_ = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    BOOST_REQUIRE(fd_ >= 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", path_.c_str());
    unlink(path_.c_str());
    BOOST_REQUIRE(bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
    setenv("NOTIFY_SOCKET", path_.c_str(), 1);
    setenv("WATCHDOG_USEC", std::to_string(watchdog.count()).c_str(), 1);
    setenv("WATCHDOG_PID", std::to_string(getpid()).c_str(), 1);
  }
  ~service_manager() {
    unsetenv("NOTIFY_SOCKET");
    unsetenv("WATCHDOG_USEC");
    unsetenv("WATCHDOG_PID");
    close(fd_);
    unlink(path_.c_str());
  }

  /// The next notification, or empty after `timeout`.
  std::string next(std::chrono::milliseconds timeout) {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(timeout.count())) <= 0) return {};
    char buf[4096];
    auto n = recv(fd_, buf, sizeof buf, 0);
    return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string{};
  }

  /// The notifications received within `span`.
  std::vector<std::string> during(std::chrono::milliseconds span) {
    std::vector<std::string> out;
    auto end = std::chrono::steady_clock::now() + span;
    for (auto now = std::chrono::steady_clock::now(); now < end;
         now = std::chrono::steady_clock::now()) {
      auto m = next(std::chrono::duration_cast<std::chrono::milliseconds>(end - now));
      if (!m.empty()) out.push_back(m);
    }
    return out;
  }

 private:
  std::string path_;
  int fd_ = -1;
};

long pets(const std::vector<std::string>& notifications) {
  return std::count(notifications.begin(), notifications.end(), "WATCHDOG=1");
}

}  // namespace

BOOST_FIXTURE_TEST_SUITE(service_manager_protocol, node_fixture)

// Ready as /readyz says, then told alive every quarter of the watchdog's
// 800 ms while every actor answers: not while a storage connection is stuck
// behind a lock (as a wedged node would be), again once it is released;
// stopping, it says so.
BOOST_AUTO_TEST_CASE(a_node_says_ready_alive_while_it_is_and_stopping) {
  service_manager manager{800ms};
  auto cfg = test_node_config("n1");
  cfg.database.lock_timeout = 30s;
  auto& node = start(cfg);
  BOOST_REQUIRE(node.service_notifier);
  std::string ready;
  auto deadline = std::chrono::steady_clock::now() + 20s;
  while (ready.find("READY=1") == std::string::npos && std::chrono::steady_clock::now() < deadline)
    ready = manager.next(1s);
  BOOST_REQUIRE_MESSAGE(ready.find("READY=1") != std::string::npos, "no READY=1 within 20 s");
  BOOST_CHECK_EQUAL(http_fetch("GET", api_url(node) + "/readyz")->status, 200);

  auto alive = manager.during(2s);
  BOOST_TEST_MESSAGE("told alive " << pets(alive) << " times in 2 s");
  BOOST_CHECK_GE(pets(alive), 5);

  auto locker = db.connect();
  BOOST_REQUIRE(locker.exec("BEGIN"));
  BOOST_REQUIRE(locker.exec("LOCK TABLE taskmill.tasks IN ACCESS EXCLUSIVE MODE"));
  // The claims' poll (every 500 ms) waits on the lock; a check under way
  // when it began may still pass.
  manager.during(1500ms);
  auto stuck = manager.during(2s);
  BOOST_CHECK_MESSAGE(pets(stuck) == 0, "told alive " << pets(stuck) << " times while stuck");
  BOOST_REQUIRE(locker.exec("ROLLBACK"));
  auto again = manager.during(2s);
  BOOST_CHECK_GE(pets(again), 3);

  stop_nodes();
  auto last = manager.during(500ms);
  BOOST_CHECK_MESSAGE(std::any_of(last.begin(), last.end(),
                                  [](const std::string& m) { return m.find("STOPPING=1") == 0; }),
                      "no STOPPING=1 as the node stopped");
}

BOOST_AUTO_TEST_CASE(without_a_service_manager_nothing_is_told) {
  auto& node = start(test_node_config("n1"));
  BOOST_CHECK(!node.service_notifier);
}

BOOST_AUTO_TEST_SUITE_END()
