// SPEC §4 heartbeats and leases, §5 watcher and reconciler: nodes killed for
// real, leaders replaced, compensation, retention and purge.
#define BOOST_TEST_MODULE recovery
#include <boost/test/unit_test.hpp>
#include <nlohmann/json.hpp>

#include "messages/errors.hpp"
#include "tests/support/nodes.hpp"
#include "tests/support/scripted_executor.hpp"
#include "tools/http_fetch.hpp"
#include "tools/node/node.hpp"
#include "tools/node_process.hpp"
#include "tools/postgres/embedded_postgres.hpp"
#include "tools/tcp_proxy.hpp"

#include <libpq-fe.h>
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <memory>
#include <optional>

#include <atomic>
#include <deque>
#include <map>
#include <random>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

using namespace taskmill;
using namespace std::chrono_literals;

namespace {

std::vector<std::string> fast_lease_options() {
  return {"heartbeat.interval=200ms", "heartbeat.missed=5", "watcher.interval=200ms",
          "scheduling.poll_interval=200ms", "node.log_level=warn"};
}

std::string binary() {
  const char* path = std::getenv("TASKMILL_BINARY");
  if (!path) throw std::runtime_error("TASKMILL_BINARY is not set: run the tests through ctest");
  return path;
}

int64_t count(const test::task_database& db, const std::string& sql,
              const std::vector<db::param>& params = {}) {
  return std::stoll(db.scalar(sql, params));
}

/// How many (task, attempt) pairs reached the executor more than once.
int deliveries_twice(test::scripted_executor& executor) {
  std::set<std::pair<int64_t, int>> runs;
  int twice = 0;
  for (const auto& r : executor.all_requests())
    if (!runs.emplace(r.body["id"].get<int64_t>(), r.body["attempt"].get<int>()).second) ++twice;
  return twice;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(processes)

BOOST_AUTO_TEST_CASE(a_killed_node_loses_no_task_and_none_runs_twice_under_one_attempt) {
  test::task_database db{"kill"};
  test::scripted_executor executor;
  auto options = fast_lease_options();
  for (const auto& o : {"types.SLOW.executor=http", "types.SLOW.timeout=20s",
                        "types.SLOW.max_retries=5", "scheduling.node_limit=300"})
    options.push_back(o);
  options.push_back("types.SLOW.url=" + executor.url());
  node_process n1{binary(), "n1", db.conninfo(), options};
  node_process n2{binary(), "n2", db.conninfo(), options};
  node_process n3{binary(), "n3", db.conninfo(), options};
  BOOST_REQUIRE_MESSAGE(
      test::eventually(
          [&] {
            return count(db, "SELECT count(*) FROM taskmill.nodes WHERE stopped_at IS NULL") == 3;
          },
          30s),
      test::later{
          [&](std::ostream& out) { out << n1.log_tail() << n2.log_tail() << n3.log_tail(); }});
  constexpr int n = 900;
  db.exec(
      "SELECT count(taskmill.submit('SLOW', k::text, payload => '{\"delay_ms\": 2000}', "
      "backoff_kind => 'fixed', "
      "backoff_base_ms => 10)) FROM generate_series(1, " +
      std::to_string(n) + ") k");
  BOOST_REQUIRE(test::eventually([&] {
    return count(db,
                 "SELECT count(*) FROM taskmill.tasks WHERE status = 'running' AND picked_by = "
                 "'n1'") >= 150;
  }));
  n1.kill_hard();
  auto killed_at = db.scalar("SELECT now()::text");
  // Read at once: the lease (1 s) has not run out yet, so nothing was swept.
  auto held = count(
      db, "SELECT count(*) FROM taskmill.tasks WHERE status = 'running' AND picked_by = 'n1'");
  BOOST_REQUIRE_MESSAGE(
      test::eventually(
          [&] {
            return count(db, "SELECT count(*) FROM taskmill.tasks WHERE status = 'succeeded'") == n;
          },
          90s),
      test::later{[&](std::ostream& out) { out << n2.log_tail() << n3.log_tail(); }});
  BOOST_TEST_MESSAGE("n1 held " << held << " running tasks when it was killed");

  // Every task succeeded exactly once; no (task, attempt) ran twice.
  BOOST_CHECK_EQUAL(
      count(db, "SELECT count(*) FROM taskmill.attempt_history WHERE outcome = 'succeeded'"), n);
  BOOST_CHECK_EQUAL(deliveries_twice(executor), 0);
  // What n1 held was recovered as lost attempts, within the lease and a sweep.
  auto lost =
      count(db, "SELECT count(*) FROM taskmill.attempts WHERE outcome = 'lost' AND node = 'n1'");
  BOOST_CHECK_EQUAL(lost, held);
  BOOST_CHECK_GE(held, 150);
  auto recovery_s =
      std::stod(db.scalar("SELECT coalesce(extract(epoch from max(finished_at) - $1::timestamptz), "
                          "0) FROM taskmill.attempts WHERE outcome = 'lost'",
                          {killed_at}));
  BOOST_TEST_MESSAGE(lost << " lost attempts recovered within " << recovery_s
                          << " s (lease 1 s, watcher every 0.2 s)");
  BOOST_CHECK_LE(recovery_s, 2.0);
  BOOST_CHECK_EQUAL(
      db.scalar("SELECT stopped_at IS NOT NULL FROM taskmill.nodes WHERE name = 'n1'"), "t");
}

BOOST_AUTO_TEST_CASE(a_new_leader_takes_over_when_the_leader_dies) {
  test::task_database db{"leader"};
  auto options = fast_lease_options();
  std::deque<node_process> nodes;
  for (const auto& name : {"l1", "l2", "l3"})
    nodes.emplace_back(binary(), name, db.conninfo(), options);
  std::string leader;
  BOOST_REQUIRE(test::eventually(
      [&] {
        auto res = db.exec("SELECT name FROM taskmill.nodes WHERE leader AND stopped_at IS NULL");
        if (res.rows() != 1) return false;
        leader = res.string(0, 0);
        return true;
      },
      30s));
  for (auto& node : nodes)
    if (node.name() == leader) node.kill_hard();
  std::string next;
  BOOST_REQUIRE_MESSAGE(test::eventually(
                            [&] {
                              auto res = db.exec(
                                  "SELECT name FROM taskmill.nodes WHERE leader AND stopped_at IS "
                                  "NULL AND name <> $1",
                                  {leader});
                              if (res.rows() != 1) return false;
                              next = res.string(0, 0);
                              return true;
                            },
                            15s),
                        "no new leader after " << leader << " died");
  BOOST_TEST_MESSAGE(leader << " died, " << next << " leads");
  // The new leader's watcher declared the old one dead.
  BOOST_CHECK(test::eventually(
      [&] {
        return db.scalar("SELECT stopped_at IS NOT NULL FROM taskmill.nodes WHERE name = $1",
                         {leader}) == "t";
      },
      10s));
  BOOST_CHECK_EQUAL(
      count(db, "SELECT count(*) FROM taskmill.nodes WHERE leader AND stopped_at IS NULL"), 1);
}

// A leader that goes silent (its network blackholed: nothing passes, nothing
// closes) or freezes (SIGSTOP) for longer than its lease: another node leads
// within the bound, a per-second cron job misses no fire time, the silent
// node's running tasks run again elsewhere, tasks submitted meanwhile are
// not handed to it; back, it is a follower, without a restart.
struct silent_leader_case {
  test::task_database db;
  test::scripted_executor executor;
  std::unique_ptr<tcp_proxy> proxy;
  std::unique_ptr<node_process> a, b;

  explicit silent_leader_case(const std::string& label) : db{label} {}

  std::vector<std::string> options() const {
    return {
        "heartbeat.interval=300ms",         "heartbeat.missed=5",       "watcher.interval=300ms",
        "scheduling.poll_interval=300ms",   "node.log_level=info",      "types.SLOW.executor=http",
        "types.SLOW.url=" + executor.url(), "types.SLOW.timeout=60s",   "types.SLOW.max_retries=5",
        "types.TICK.executor=noop",         "types.QUICK.executor=noop"};
  }

  std::string leader() const {
    return db.scalar(
        "SELECT CASE WHEN expires_at > now() THEN node ELSE '' END FROM taskmill.leadership");
  }

  /// a leads and runs three long tasks; b runs beside it; a per-second job.
  void start(bool a_through_proxy) {
    auto a_conninfo = db.conninfo();
    if (a_through_proxy) {
      std::smatch port;
      BOOST_REQUIRE(std::regex_search(a_conninfo, port, std::regex{"port=(\\d+)"}));
      proxy = std::make_unique<tcp_proxy>("127.0.0.1:" + port[1].str());
      a_conninfo =
          std::regex_replace(a_conninfo, std::regex{"port=\\d+"},
                             "port=" + proxy->address().substr(proxy->address().rfind(':') + 1));
    }
    a = std::make_unique<node_process>(binary(), "a", a_conninfo, options());
    BOOST_REQUIRE_MESSAGE(test::eventually([&] { return leader() == "a"; }, 30s), a->log_tail());
    db.exec(
        "SELECT count(taskmill.submit('SLOW', 'long' || k, payload => '{\"delay_ms\": 30000}')) "
        "FROM generate_series(1, 3) k");
    BOOST_REQUIRE(test::eventually([&] {
      return count(db,
                   "SELECT count(*) FROM taskmill.tasks WHERE status = 'running' AND "
                   "picked_by = 'a'") == 3;
    }));
    b = std::make_unique<node_process>(binary(), "b", db.conninfo(), options());
    BOOST_REQUIRE(test::eventually([&] {
      return count(db, "SELECT count(*) FROM taskmill.nodes WHERE stopped_at IS NULL") == 2;
    }));
    db.exec(
        "SELECT taskmill.put_job('tick', '* * * * * *', 'UTC', 'TICK', NULL, NULL, NULL, NULL, "
        "NULL, NULL, NULL, NULL, true, 'any', NULL, 'allow', 'catch_up', 100, '', 'api', "
        "date_trunc('second', now()) + interval '1 s', now())");
    BOOST_REQUIRE(test::eventually(
        [&] { return count(db, "SELECT count(*) FROM taskmill.job_firings") >= 2; }, 10s));
  }

  /// Silences a with `silence` for `how_long`, then `heal`s it, and checks
  /// everything the issue asks.
  void run(const std::function<void()>& silence, const std::function<void()>& heal,
           std::chrono::seconds how_long) {
    auto term_before = db.scalar("SELECT term FROM taskmill.leadership");
    silence();
    auto silent_at = db.scalar("SELECT now()::text");
    BOOST_REQUIRE_MESSAGE(test::eventually([&] { return leader() == "b"; }, 15s),
                          test::later{[&](std::ostream& out) { out << b->log_tail(); }});
    auto took_over_s =
        std::stod(db.scalar("SELECT extract(epoch FROM now() - $1::timestamptz)", {silent_at}));
    BOOST_TEST_MESSAGE("b leads " << took_over_s << " s after a went silent (lease 1.5 s)");
    BOOST_CHECK_LE(took_over_s, 3.5);
    // Tasks submitted now run on b at once; none is handed to a.
    db.exec("SELECT count(taskmill.submit('QUICK', 'quick' || k)) FROM generate_series(1, 20) k");
    BOOST_CHECK_MESSAGE(
        test::eventually(
            [&] {
              return count(db,
                           "SELECT count(*) FROM taskmill.tasks WHERE type = 'QUICK' AND "
                           "status = 'succeeded'") == 20;
            },
            5s),
        db.scalar("SELECT string_agg(status || ' ' || coalesce(picked_by, '-'), ', ') FROM "
                  "taskmill.tasks WHERE type = 'QUICK'"));
    BOOST_CHECK_EQUAL(count(db,
                            "SELECT count(*) FROM taskmill.tasks WHERE type = 'QUICK' AND "
                            "(attempt > 1 OR picked_by = 'a')"),
                      0);
    // a's long tasks were lost and run again on b.
    BOOST_CHECK(test::eventually(
        [&] {
          return count(db,
                       "SELECT count(*) FROM taskmill.tasks WHERE type = 'SLOW' AND status = "
                       "'running' AND picked_by = 'b' AND attempt = 2") == 3;
        },
        10s));
    std::this_thread::sleep_until(std::chrono::steady_clock::now() + how_long -
                                  std::chrono::seconds{static_cast<int>(took_over_s)});
    heal();
    auto healed_at = db.scalar("SELECT now()::text");
    // a is back, a follower under a new incarnation; b keeps the lead.
    BOOST_CHECK_MESSAGE(
        test::eventually(
            [&] {
              return db.scalar(
                         "SELECT stopped_at IS NULL AND heartbeat_at > $1::timestamptz "
                         "FROM taskmill.nodes WHERE name = 'a'",
                         {healed_at}) == "t";
            },
            20s),
        a->log_tail());
    std::this_thread::sleep_for(3s);
    BOOST_CHECK_EQUAL(leader(), "b");
    BOOST_CHECK_EQUAL(count(db, "SELECT term FROM taskmill.leadership"),
                      std::stoll(term_before) + 1);
    BOOST_CHECK_EQUAL(db.scalar("SELECT string_agg(name, ',' ORDER BY name) FROM taskmill.nodes "
                                "WHERE leader AND stopped_at IS NULL"),
                      "b");
    // Every second fired, once, from before the cut to now.
    auto firings = db.exec(
        "SELECT count(*), count(DISTINCT fire_at), extract(epoch FROM max(fire_at) - "
        "min(fire_at))::bigint + 1 FROM taskmill.job_firings WHERE job = 'tick'");
    BOOST_TEST_MESSAGE(firings.int64(0, 0) << " firings over " << firings.int64(0, 2) << " s");
    BOOST_CHECK_EQUAL(firings.int64(0, 0), firings.int64(0, 1));
    BOOST_CHECK_EQUAL(firings.int64(0, 0), firings.int64(0, 2));
    BOOST_CHECK_GE(firings.int64(0, 2), how_long.count());
    // No (task, attempt) went to the executor twice.
    BOOST_CHECK_EQUAL(deliveries_twice(executor), 0);
    std::ifstream in{a->log_file()};
    int refused = 0;
    for (std::string line; std::getline(in, line);)
      if (line.find("not the leader: term") != std::string::npos) ++refused;
    BOOST_TEST_MESSAGE("a's duties refused by the fence after it came back: " << refused);
  }
};

BOOST_AUTO_TEST_CASE(a_silent_leader_loses_the_lead_within_the_lease_and_comes_back_a_follower) {
  silent_leader_case c{"silentleader"};
  c.start(true);
  c.run([&] { c.proxy->go_silent(); }, [&] { c.proxy->restore(); }, 6s);
}

BOOST_AUTO_TEST_CASE(a_frozen_leader_does_not_act_as_leader_when_it_thaws) {
  silent_leader_case c{"frozenleader"};
  c.start(false);
  c.run([&] { kill(c.a->pid(), SIGSTOP); }, [&] { kill(c.a->pid(), SIGCONT); }, 5s);
}

BOOST_AUTO_TEST_SUITE_END()

namespace {

struct node_fixture : test::nodes_fixture {
  node_fixture() : nodes_fixture("recover") {}
};

config quick_config(const std::string& name) {
  auto cfg = test::test_node_config(name);
  cfg.heartbeat.interval = 100ms;
  cfg.heartbeat.missed = 5;
  cfg.watcher.interval = 100ms;
  cfg.reconciler.interval = 200ms;
  cfg.scheduling.poll_interval = 200ms;
  return cfg;
}

}  // namespace

BOOST_FIXTURE_TEST_SUITE(nodes, node_fixture)

BOOST_AUTO_TEST_CASE(a_live_name_cannot_be_taken_twice) {
  start(quick_config("same"));
  auto second = try_start(quick_config("same"), 2s);
  BOOST_REQUIRE(!second);
  BOOST_CHECK_MESSAGE(
      error_message(second.error()).find("node name same is in use") != std::string::npos,
      error_message(second.error()));
}

BOOST_AUTO_TEST_CASE(a_node_declared_dead_registers_again_before_it_claims) {
  start(quick_config("zombie"));
  auto first = db.scalar("SELECT incarnation FROM taskmill.nodes WHERE name = 'zombie'");
  db.exec("UPDATE taskmill.nodes SET stopped_at = now() WHERE name = 'zombie'");
  // A node declared dead may not claim.
  BOOST_CHECK_EQUAL(count(db,
                          "SELECT count(*) FROM taskmill.claim('zombie', 10, '{}', '{}', '{}', 0, "
                          "NULL, NULL, NULL)"),
                    0);
  BOOST_REQUIRE(test::eventually([&] {
    return db.scalar(
               "SELECT (stopped_at IS NULL)::text || (incarnation <> $1)::text FROM taskmill.nodes "
               "WHERE name = "
               "'zombie'",
               {first}) == "truetrue";
  }));
  db.exec("SELECT taskmill.submit('SLEEP', 'after', payload => '10')");
  BOOST_CHECK(test::eventually([&] {
    return db.scalar("SELECT status FROM taskmill.tasks WHERE key = 'after'") == "succeeded";
  }));
}

BOOST_AUTO_TEST_CASE(a_node_that_cannot_renew_its_heartbeat_stops_claiming) {
  auto cfg = quick_config("blocked");
  cfg.database.lock_timeout = 150ms;
  start(cfg);
  // Holding its row makes every heartbeat fail with a lock timeout while the
  // database stays reachable for everything else.
  auto holder = db.connect();
  BOOST_REQUIRE(holder.exec("BEGIN"));
  BOOST_REQUIRE(holder.exec("SELECT 1 FROM taskmill.nodes WHERE name = 'blocked' FOR UPDATE"));
  std::this_thread::sleep_for(1500ms);  // past the lease (5 x 100 ms)
  db.exec("SELECT taskmill.submit('NOOP', 'while-blocked')");
  std::this_thread::sleep_for(1s);
  BOOST_CHECK_EQUAL(db.scalar("SELECT status FROM taskmill.tasks WHERE key = 'while-blocked'"),
                    "pending");
  BOOST_REQUIRE(holder.exec("ROLLBACK"));
  BOOST_CHECK(test::eventually([&] {
    return db.scalar("SELECT status FROM taskmill.tasks WHERE key = 'while-blocked'") ==
           "succeeded";
  }));
}

BOOST_AUTO_TEST_CASE(a_slow_statement_of_the_api_or_the_leader_does_not_hold_up_the_heartbeat) {
  auto cfg = quick_config("patient");
  cfg.database.lock_timeout = 10s;
  auto& node = start(cfg);
  // A read of the jobs (the API's, the cron's) waits on the node's main
  // connection for as long as this lock is held: seconds, where the lease is
  // half a second.
  auto holder = db.connect();
  BOOST_REQUIRE(holder.exec("BEGIN"));
  BOOST_REQUIRE(holder.exec("LOCK TABLE taskmill.jobs IN ACCESS EXCLUSIVE MODE"));
  caf::anon_send(node.storage, jobs_atom_v);
  // That read, or the cron's read of due jobs ahead of it.
  BOOST_REQUIRE(test::eventually([&] {
    return count(db,
                 "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                 "AND datname = current_database()") > 0;
  }));
  auto waiting_since = db.scalar("SELECT now()");
  std::this_thread::sleep_for(1500ms);  // three leases
  db.exec("SELECT taskmill.submit('NOOP', 'while-reading')");
  BOOST_CHECK_MESSAGE(
      test::eventually(
          [&] {
            return db.scalar("SELECT status FROM taskmill.tasks WHERE key = 'while-reading'") ==
                   "succeeded";
          },
          2s),
      "a task submitted while the read waited did not run: the node stopped claiming");
  BOOST_CHECK_EQUAL(db.scalar("SELECT heartbeat_at > $1::timestamptz + interval '1 s' FROM "
                              "taskmill.nodes WHERE name = 'patient'",
                              {waiting_since}),
                    "t");
  BOOST_REQUIRE(holder.exec("ROLLBACK"));
}

BOOST_AUTO_TEST_CASE(tasks_of_a_claim_whose_answer_was_lost_run_without_waiting_for_their_timeout) {
  std::smatch port;
  const auto& direct = db.conninfo();
  BOOST_REQUIRE(std::regex_search(direct, port, std::regex{"port=(\\d+)"}));
  tcp_proxy proxy{"127.0.0.1:" + port[1].str()};
  auto proxy_port = proxy.address().substr(proxy.address().rfind(':') + 1);
  auto cfg = quick_config("unanswered");
  cfg.heartbeat.interval = 500ms;  // a lease of 2.5 s outlasts the answers held
  cfg.scheduling.poll_interval = 100ms;
  // Tasks are claimed, not handed off in their submits.
  cfg.scheduling.hand_off_permits = 0;
  start(cfg, std::regex_replace(direct, std::regex{"port=\\d+"}, "port=" + proxy_port));
  db.exec("SELECT taskmill.submit('NOOP', 'warm-up')");
  BOOST_REQUIRE(test::eventually([&] {
    return db.scalar("SELECT status FROM taskmill.tasks WHERE key = 'warm-up'") == "succeeded";
  }));
  // From here what PostgreSQL answers the node is lost with its connections:
  // the node's next claim takes the task and commits, and its answer never
  // comes. A claim under way as the answers are held (an idle poll) leaves
  // the node waiting for it; then the task stays pending and is tried again.
  std::string key;
  bool claimed = false;
  for (int round = 0; round < 3 && !claimed; ++round) {
    key = "unanswered-" + std::to_string(round);
    proxy.hold_answers();
    db.exec("SELECT taskmill.submit('NOOP', $1, timeout_ms => 60000)", {key});
    claimed = test::eventually(
        [&] {
          return db.scalar("SELECT status FROM taskmill.tasks WHERE key = $1", {key}) == "running";
        },
        2s);
    proxy.cut();
    std::this_thread::sleep_for(300ms);  // for the proxy to close them
    proxy.restore();
    // Reconnected, with its lease renewed, before it is tried again.
    if (!claimed) std::this_thread::sleep_for(1500ms);
  }
  BOOST_REQUIRE_MESSAGE(claimed, "no claim took a task while the answers were held");
  BOOST_CHECK_MESSAGE(test::eventually(
                          [&] {
                            return db.scalar("SELECT status FROM taskmill.tasks WHERE key = $1",
                                             {key}) == "succeeded";
                          },
                          10s),
                      "the task of the lost claim waited for its timeout (60 s)");
  // It ran under the attempt the lost claim gave it, none lost on the way
  // (the history keeps attempts that did not succeed).
  BOOST_CHECK_EQUAL(db.scalar("SELECT attempt FROM taskmill.tasks WHERE key = $1", {key}), "1");
  BOOST_CHECK_EQUAL(count(db,
                          "SELECT count(*) FROM taskmill.attempts a JOIN taskmill.tasks t ON "
                          "t.id = a.task_id WHERE t.key = $1",
                          {key}),
                    0);
}

// A task submitted to an idle node is handed to it in the submit and runs
// once, under the attempt the submit gave it: the node hears of it with the
// task, or, too large for a notification, with its ids, and reads it.
BOOST_AUTO_TEST_CASE(a_task_submitted_to_an_idle_node_is_handed_to_it_and_runs_once) {
  auto cfg = quick_config("handed");
  // Its offer holds for 3 s without a heartbeat, whatever the machine's load.
  cfg.heartbeat.interval = 1s;
  start(cfg);
  BOOST_REQUIRE(test::eventually([&] {
    return db.scalar("SELECT count(*) FROM taskmill.offer_slots WHERE node = 'handed'") != "0";
  }));
  for (int i = 0; i < 50; ++i) {
    auto key = "h" + std::to_string(i);
    auto size = std::to_string(i % 10 == 0 ? 9000 : 10);
    db.exec(
        "SELECT taskmill.submit('NOOP', $1, payload => jsonb_build_object('s', repeat('x', "
        "$2::int)))",
        {key, size});
    // Running under the node from the commit (or done by now).
    BOOST_CHECK_EQUAL(db.scalar("SELECT picked_by || ' ' || attempt || ' ' || "
                                "(started_at >= created_at) FROM taskmill.tasks WHERE key = $1",
                                {key}),
                      "handed 1 true");
    std::this_thread::sleep_for(5ms);
  }
  BOOST_CHECK(test::eventually([&] {
    return count(db, "SELECT count(*) FROM taskmill.tasks WHERE status = 'succeeded'") == 50;
  }));
  BOOST_CHECK_EQUAL(count(db, "SELECT count(*) FROM taskmill.tasks WHERE attempt <> 1"), 0);
  BOOST_CHECK_EQUAL(count(db, "SELECT count(*) FROM taskmill.attempts"), 0);
}

// A hand-off whose notification the node missed (its listener was away) runs
// once the listener is back, not after the task's timeout.
BOOST_AUTO_TEST_CASE(a_task_handed_off_while_the_listener_is_away_runs_once_it_is_back) {
  auto cfg = quick_config("deaf");
  cfg.heartbeat.interval = 1s;
  // The listener, cut off, comes back 2 s later.
  cfg.database.reconnect_min = 2s;
  start(cfg);
  BOOST_REQUIRE(test::eventually([&] {
    return db.scalar("SELECT count(*) FROM taskmill.offer_slots WHERE node = 'deaf'") != "0";
  }));
  BOOST_REQUIRE_EQUAL(
      count(db,
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE datname = current_database() AND query = 'LISTEN taskmill_handoffs'"),
      1);
  db.exec("SELECT taskmill.submit('NOOP', 'unheard', timeout_ms => 60000)");
  BOOST_REQUIRE_EQUAL(db.scalar("SELECT status || ' ' || picked_by FROM taskmill.tasks "
                                "WHERE key = 'unheard'"),
                      "running deaf");
  std::this_thread::sleep_for(500ms);
  BOOST_CHECK_EQUAL(db.scalar("SELECT status FROM taskmill.tasks WHERE key = 'unheard'"),
                    "running");
  BOOST_CHECK_MESSAGE(
      test::eventually(
          [&] {
            return db.scalar("SELECT status FROM taskmill.tasks WHERE key = 'unheard'") ==
                   "succeeded";
          },
          10s),
      "the task handed off unheard waited for its timeout (60 s)");
  BOOST_CHECK_EQUAL(db.scalar("SELECT attempt FROM taskmill.tasks WHERE key = 'unheard'"), "1");
}

BOOST_AUTO_TEST_CASE(the_reconciler_gives_back_permits_of_executions_the_database_ended) {
  auto cfg = quick_config("recon");
  cfg.scheduling.node_limit = 1;
  auto& node = start(cfg);
  db.exec("SELECT taskmill.submit('SLEEP', 'long', payload => '30000', timeout_ms => 60000)");
  BOOST_REQUIRE(test::eventually([&] {
    return db.scalar("SELECT status FROM taskmill.tasks WHERE key = 'long'") == "running";
  }));
  // Cancelled in the database while it sleeps on: the node's one permit is
  // held by an execution that no longer counts.
  db.exec("SELECT taskmill.cancel('SLEEP', 'long')");
  db.exec("SELECT taskmill.submit('NOOP', 'next')");
  BOOST_CHECK(test::eventually(
      [&] {
        return db.scalar("SELECT status FROM taskmill.tasks WHERE key = 'next'") == "succeeded";
      },
      5s));
  BOOST_CHECK(test::eventually([&] {
    auto in_flight = test::in_flight(*sys, node.limiter);
    return in_flight && *in_flight == 0;
  }));
}

BOOST_AUTO_TEST_CASE(the_leaders_watcher_stops_and_purges_what_is_past_retention) {
  auto cfg = quick_config("keeper");
  cfg.watcher.success_retention = 300ms;
  cfg.watcher.purge_retention = 3s;
  cfg.watcher.batch_size = 3;
  start(cfg);
  db.exec("SELECT count(taskmill.submit('NOOP', k::text)) FROM generate_series(1, 10) k");
  db.exec("SELECT taskmill.submit('FAIL', 'broken', max_retries => 0)");
  db.exec("SELECT taskmill.submit('NOOP', 'later', execute_at => now() + interval '1 hour')");
  BOOST_REQUIRE(test::eventually([&] {
    return count(db,
                 "SELECT count(*) FROM taskmill.tasks WHERE status IN ('succeeded', "
                 "'stopped', 'dead')") == 11;
  }));
  BOOST_CHECK(test::eventually([&] {
    return count(db, "SELECT count(*) FROM taskmill.tasks WHERE status = 'stopped'") == 10;
  }));
  // Nothing is deleted before the purge retention.
  BOOST_CHECK_EQUAL(count(db, "SELECT count(*) FROM taskmill.tasks"), 12);
  BOOST_CHECK(
      test::eventually([&] { return count(db, "SELECT count(*) FROM taskmill.tasks") == 1; }, 10s));
  BOOST_CHECK_EQUAL(db.scalar("SELECT key FROM taskmill.tasks"), "later");
  BOOST_CHECK_EQUAL(count(db, "SELECT count(*) FROM taskmill.attempts"), 0);
}

BOOST_AUTO_TEST_CASE(a_restarted_node_retries_what_its_earlier_run_held) {
  db.exec("SELECT taskmill.register_node('r1', 'old', '', 1000, NULL)");
  db.exec("SELECT count(taskmill.submit('SLEEP', k::text)) FROM generate_series(1, 4) k");
  BOOST_REQUIRE_EQUAL(db.claim(4, "r1").size(), 4u);
  // The old run crashed: its heartbeat stopped more than a lease ago.
  db.exec("UPDATE taskmill.nodes SET heartbeat_at = now() - interval '2 s' WHERE name = 'r1'");
  auto retried = count(db, "SELECT taskmill.register_node('r1', 'new', '', 1000, NULL)");
  BOOST_CHECK_EQUAL(retried, 4);
  BOOST_CHECK_EQUAL(count(db,
                          "SELECT count(*) FROM taskmill.tasks WHERE status = 'failed' AND "
                          "error = 'node r1 restarted'"),
                    4);
  BOOST_CHECK_EQUAL(count(db, "SELECT count(*) FROM taskmill.attempts WHERE outcome = 'lost'"), 4);
}

BOOST_AUTO_TEST_CASE(a_stopping_node_lets_short_work_finish_and_hands_back_the_rest) {
  auto cfg = quick_config("stopper");
  cfg.node.shutdown_grace = 1s;
  auto& node = start(cfg);
  db.exec(
      "SELECT count(taskmill.submit('SLEEP', 'short' || k, payload => '100')) FROM "
      "generate_series(1, 3) k");
  db.exec(
      "SELECT count(taskmill.submit('SLEEP', 'long' || k, payload => '30000')) FROM "
      "generate_series(1, 2) k");
  // In flight: the dispatcher has them (the pusher counts them just before).
  BOOST_REQUIRE(test::eventually([&] {
    auto in_flight = test::in_flight(*sys, node.limiter);
    return in_flight && *in_flight == 5;
  }));
  stop_node(*sys, node);
  BOOST_CHECK_EQUAL(
      count(db,
            "SELECT count(*) FROM taskmill.tasks WHERE key LIKE 'short%' AND status = 'succeeded'"),
      3);
  BOOST_CHECK_EQUAL(
      count(db,
            "SELECT count(*) FROM taskmill.tasks WHERE key LIKE 'long%' AND status = 'pending' "
            "AND retry_count = 0 AND attempt = 1"),
      2);
  BOOST_CHECK_EQUAL(count(db, "SELECT count(*) FROM taskmill.attempts WHERE outcome = 'released'"),
                    2);
  BOOST_CHECK_EQUAL(
      db.scalar("SELECT stopped_at IS NOT NULL FROM taskmill.nodes WHERE name = 'stopper'"), "t");
}

// The claim is held on the limits' lock (taskmill.claim_by_turns) until the
// node is stopping; once let go it commits its task running, and that task
// must be handed back with the rest, not left running by a stopped node.
BOOST_AUTO_TEST_CASE(a_claim_under_way_when_a_node_stops_is_handed_back) {
  auto cfg = quick_config("stopper");
  cfg.scheduling.global_limit = 10;
  cfg.database.lock_timeout = 10s;
  auto& node = start(cfg);
  auto holder = db.connect();
  BOOST_REQUIRE(holder.exec("SELECT pg_advisory_lock(7345, 3)"));
  db.exec("SELECT taskmill.submit('NOOP', 'claimed-while-stopping')");
  BOOST_REQUIRE(test::eventually([&] {
    return count(db,
                 "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                 "AND query LIKE '%claim_by_turns%'") == 1;
  }));
  std::thread release([&] {
    std::this_thread::sleep_for(500ms);
    BOOST_CHECK(holder.exec("SELECT pg_advisory_unlock(7345, 3)"));
  });
  stop_node(*sys, node);
  release.join();
  BOOST_CHECK_EQUAL(
      count(db, "SELECT count(*) FROM taskmill.tasks WHERE status = 'pending' AND attempt = 1"), 1);
  BOOST_CHECK_EQUAL(count(db, "SELECT count(*) FROM taskmill.attempts WHERE outcome = 'released'"),
                    1);
}

BOOST_AUTO_TEST_CASE(the_watcher_kills_tasks_past_their_pending_deadline) {
  auto cfg = quick_config("watch");
  task_type_config waiting;  // no executor here: its tasks only wait
  waiting.pending_deadline = 300ms;
  cfg.types["WAITING"] = waiting;
  start(cfg);
  db.exec("SELECT taskmill.submit('WAITING', 'w')");
  BOOST_CHECK(test::eventually(
      [&] {
        return db.scalar(
                   "SELECT status || ':' || coalesce(error, '') FROM taskmill.tasks WHERE key = "
                   "'w'") == "dead:pending deadline passed";
      },
      5s));
}

BOOST_AUTO_TEST_CASE(compensation_rules_create_exactly_the_missing_tasks) {
  db.exec(
      "CREATE TABLE articles (id int PRIMARY KEY, state text NOT NULL, created_at timestamptz "
      "DEFAULT now())");
  db.exec(
      "INSERT INTO articles (id, state) SELECT g, CASE WHEN g = 6 THEN 'published' ELSE "
      "'pending_review' END "
      "FROM generate_series(1, 6) g");
  auto pending = db.call("submit('AUDIT', '1')");
  auto dead =
      db.call("submit('AUDIT', '2', max_retries => 0, execute_at => now() - interval '1 s')");
  BOOST_REQUIRE_EQUAL(db.claim(1, "someone").size(), 1u);
  BOOST_REQUIRE(db.complete(dead.id, 1, "fail", "gave up"));
  auto cancelled = db.call("submit('AUDIT', '3')");
  db.call("cancel(" + std::to_string(cancelled.id) + "::bigint)");

  auto cfg = quick_config("reconcile");
  cfg.reconciler.rules.push_back({"article-audit", "AUDIT",
                                  "SELECT id::text AS key, created_at AS execute_at, "
                                  "jsonb_build_object('article', id) AS payload "
                                  "FROM articles WHERE state = 'pending_review'"});
  start(cfg);
  auto live = [&] {
    return count(db,
                 "SELECT count(*) FROM taskmill.tasks WHERE type = 'AUDIT' AND status = 'pending'");
  };
  BOOST_REQUIRE(test::eventually([&] { return live() == 5; }, 10s));
  // Let several more passes run: nothing is submitted twice.
  auto rows = count(db, "SELECT count(*) FROM taskmill.tasks");
  std::this_thread::sleep_for(1s);
  BOOST_CHECK_EQUAL(count(db, "SELECT count(*) FROM taskmill.tasks"), rows);
  BOOST_CHECK_EQUAL(live(), 5);
  BOOST_CHECK_EQUAL(db.unit("AUDIT", "1").back().id, pending.id);  // left alone
  BOOST_CHECK_EQUAL(db.by_id(dead.id).status, "pending");          // re-armed in place
  BOOST_CHECK_EQUAL(db.unit("AUDIT", "3").size(), 2u);             // cancelled + new
  BOOST_CHECK_EQUAL(db.unit("AUDIT", "6").size(), 0u);
  BOOST_CHECK_EQUAL(
      db.scalar("SELECT payload::text FROM taskmill.tasks WHERE type = 'AUDIT' AND key = '4'"),
      R"({"article": 4})");
}

BOOST_AUTO_TEST_CASE(a_broken_compensation_query_stops_the_node_from_starting) {
  auto cfg = quick_config("badrule");
  cfg.reconciler.rules.push_back({"broken", "AUDIT", "SELEKT 1"});
  auto node = try_start(cfg, 3s);
  BOOST_REQUIRE(!node);
  BOOST_CHECK_MESSAGE(error_message(node.error()).find("compensate_0") != std::string::npos,
                      error_message(node.error()));
}

BOOST_AUTO_TEST_CASE(type_settings_a_task_could_not_hold_stop_the_node_from_starting) {
  auto cfg = quick_config("badtype");
  cfg.types["SLEEP"].timeout = std::chrono::hours{24 * 8};
  auto node = try_start(cfg, 3s);
  BOOST_REQUIRE(!node);
  BOOST_CHECK_MESSAGE(error_message(node.error()).find("task type \"SLEEP\": timeout_ms must be") !=
                          std::string::npos,
                      error_message(node.error()));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(sweeps)

// SPEC §4: an attempt silent past its type's heartbeat timeout, or the
// defaults' for a type without settings of its own, is a failed attempt,
// and its node is asked to stop it; a type whose own settings have none
// runs on.
BOOST_AUTO_TEST_CASE(silent_attempts_fail_by_their_types_heartbeat_timeout_or_the_defaults) {
  test::task_database db{"silent"};
  auto term = db.seize_lead();
  db.exec(
      "SELECT taskmill.put_type_settings(ARRAY['', 'OWN'], ARRAY[5000, 5000], ARRAY[3, 3], "
      "ARRAY['fixed', 'fixed'], ARRAY[10, 10], ARRAY[1000, 1000], ARRAY[0, 0]::real[], "
      "ARRAY[NULL, NULL]::bigint[], ARRAY[NULL, NULL]::int[], ARRAY[100, NULL]::bigint[], "
      "ARRAY[NULL, NULL]::int[])");
  db.exec("SELECT taskmill.submit('OTHER', 'a')");
  db.exec("SELECT taskmill.submit('OWN', 'b')");
  BOOST_REQUIRE_EQUAL(db.claim(2).size(), 2u);
  db.exec("UPDATE taskmill.tasks SET started_at = now() - interval '1 second'");
  BOOST_CHECK_EQUAL(db.scalar("SELECT taskmill.sweep_silent(100, " + term + ")"), "1");
  BOOST_CHECK_EQUAL(db.scalar("SELECT string_agg(type || ' ' || status, ', ' ORDER BY type) "
                              "FROM taskmill.tasks"),
                    "OTHER failed, OWN running");
  BOOST_CHECK_EQUAL(db.scalar("SELECT string_agg(type, ',') FROM taskmill.cancel_requests"),
                    "OTHER");
  BOOST_CHECK_EQUAL(
      db.scalar("SELECT outcome FROM taskmill.attempt_history WHERE attempt = 1 AND outcome <> "
                "'running'"),
      "silent");
}

BOOST_AUTO_TEST_CASE(lost_leases_and_timeouts_are_failed_attempts) {
  test::task_database db{"sweeps"};
  auto term = db.seize_lead();
  db.exec("SELECT taskmill.register_node('alive', 'a', '', 1000, NULL)");
  db.exec("SELECT taskmill.register_node('gone', 'g', '', 1000, NULL)");
  db.exec(
      "SELECT count(taskmill.submit('T', k::text, max_retries => 1)) FROM generate_series(1, 6) k");
  db.claim(3, "alive");
  db.claim(3, "gone");
  db.exec("UPDATE taskmill.nodes SET heartbeat_at = now() - interval '10 s' WHERE name = 'gone'");
  BOOST_CHECK_EQUAL(count(db, "SELECT taskmill.sweep_lost(1000, 1000, " + term + ")"), 3);
  BOOST_CHECK_EQUAL(count(db,
                          "SELECT count(*) FROM taskmill.tasks WHERE status = 'failed' AND "
                          "error = 'the node running it lost its lease'"),
                    3);
  // Timeouts: one running past its timeout (and the grace), bounded batches.
  db.exec(
      "UPDATE taskmill.tasks SET started_at = now() - interval '1 hour' WHERE status = 'running'");
  BOOST_CHECK_EQUAL(count(db, "SELECT taskmill.sweep_timeouts(0, 2, " + term + ")"), 2);
  BOOST_CHECK_EQUAL(count(db, "SELECT taskmill.sweep_timeouts(0, 2, " + term + ")"), 1);
  BOOST_CHECK_EQUAL(count(db, "SELECT taskmill.sweep_timeouts(0, 2, " + term + ")"), 0);
  BOOST_CHECK_EQUAL(count(db, "SELECT count(*) FROM taskmill.attempts WHERE outcome = 'timeout'"),
                    3);
  // A late outcome of a lost attempt is stale.
  auto id =
      std::stoll(db.scalar("SELECT min(task_id) FROM taskmill.attempts WHERE outcome = 'lost'"));
  BOOST_CHECK(!db.complete(id, 1, "succeeded"));
}

BOOST_AUTO_TEST_CASE(retention_and_purge_touch_only_what_is_old_enough) {
  test::task_database db{"purge"};
  auto term = db.seize_lead();
  auto make = [&](const std::string& key, const std::string& status, const std::string& age) {
    auto t = db.call("submit('P', '" + key + "')");
    db.exec("UPDATE taskmill.tasks SET status = '" + status + "', updated_at = now() - interval '" +
                age + "', attempt = 1 WHERE id = $1",
            {std::to_string(t.id)});
    db.exec("INSERT INTO taskmill.attempts (task_id, attempt, outcome) VALUES ($1, 1, 'x')",
            {std::to_string(t.id)});
    return t.id;
  };
  auto old_success = make("a", "succeeded", "2 days");
  auto new_success = make("b", "succeeded", "1 hour");
  auto old_stopped = make("c", "stopped", "8 days");
  auto old_dead = make("d", "dead", "8 days");
  auto new_cancelled = make("e", "cancelled", "1 day");
  auto old_pending = make("f", "pending", "30 days");
  // As the leader's watcher makes it ahead.
  db.exec(
      "SELECT taskmill.make_stopped_days(d, d) FROM (SELECT (now() AT TIME ZONE 'UTC')::date) "
      "x(d)");
  BOOST_CHECK_EQUAL(count(db, "SELECT taskmill.sweep_succeeded(86400000, 1000, " + term + ")"), 1);
  BOOST_CHECK_EQUAL(db.by_id(old_success).status, "stopped");
  BOOST_CHECK_EQUAL(db.by_id(new_success).status, "succeeded");
  // Into today's table of stopped tasks (UTC), whose purge drops it whole.
  BOOST_CHECK_EQUAL(db.scalar("SELECT t.tableoid = to_regclass('taskmill.' || "
                              "taskmill.stopped_day_table((now() AT TIME ZONE 'UTC')::date)) "
                              "FROM taskmill.tasks t WHERE t.id = $1",
                              {std::to_string(old_success)}),
                    "t");
  BOOST_CHECK_EQUAL(count(db, "SELECT taskmill.sweep_purge(604800000, 1, " + term + ")"), 1);
  BOOST_CHECK_EQUAL(count(db, "SELECT taskmill.sweep_purge(604800000, 1000, " + term + ")"), 1);
  BOOST_CHECK_EQUAL(count(db, "SELECT taskmill.sweep_purge(604800000, 1000, " + term + ")"), 0);
  auto exists = [&](int64_t id) {
    return count(db, "SELECT count(*) FROM taskmill.tasks WHERE id = $1", {std::to_string(id)});
  };
  BOOST_CHECK_EQUAL(exists(old_stopped), 0);
  BOOST_CHECK_EQUAL(exists(old_dead), 0);
  BOOST_CHECK_EQUAL(exists(old_success), 1);  // stopped just now: its purge clock starts now
  BOOST_CHECK_EQUAL(exists(new_cancelled), 1);
  BOOST_CHECK_EQUAL(exists(old_pending), 1);
  BOOST_CHECK_EQUAL(count(db, "SELECT count(*) FROM taskmill.attempts"), 4);
  // Purged tasks leave no key behind; cancelled ones held none.
  BOOST_CHECK_EQUAL(
      db.scalar("SELECT string_agg(t.key, ',' ORDER BY t.key) FROM taskmill.task_keys k JOIN "
                "taskmill.tasks t ON t.id = k.task_id"),
      "a,b,f");
  BOOST_CHECK_EQUAL(count(db, "SELECT count(*) FROM taskmill.task_keys"), 3);
}

// SPEC §11: a day of stopped tasks goes whole. Its tasks leave the task
// table as the day is detached; what refers to them goes a batch at a time
// while the day's rows stay; then its table is dropped.
BOOST_AUTO_TEST_CASE(a_day_of_stopped_tasks_past_the_purge_retention_goes_whole) {
  test::task_database db{"days"};
  auto term = db.seize_lead();
  const std::string day = "((now() AT TIME ZONE 'UTC')::date - 10)";
  const std::string table = "'taskmill.' || taskmill.stopped_day_table" + day;
  BOOST_REQUIRE_EQUAL(count(db, "SELECT taskmill.make_stopped_days(" + day + ", " + day + ")"), 1);
  db.exec("SELECT count(taskmill.submit('D', 'd' || g)) FROM generate_series(1, 7) g");
  db.exec("SELECT taskmill.submit('D', 'today'), taskmill.submit('D', 'undated')");
  db.exec(
      "INSERT INTO taskmill.attempts (task_id, attempt, outcome) "
      "SELECT id, 1, 'failed' FROM taskmill.tasks");
  auto stop_at = [&](const std::string& keys, const std::string& at) {
    db.exec("UPDATE taskmill.tasks SET status = 'stopped', updated_at = " + at + " WHERE key " +
            keys);
  };
  stop_at("LIKE 'd_'", "taskmill.stopped_day_start" + day + " + interval '1 hour'");
  stop_at("= 'today'", "now()");
  stop_at("= 'undated'", "now() - interval '20 days'");
  auto in_day = [&] {
    return count(db,
                 "SELECT count(*) FROM taskmill.tasks WHERE tableoid = to_regclass(" + table + ")");
  };
  BOOST_REQUIRE_EQUAL(in_day(), 7);
  auto day_rows = [&] {
    return count(db,
                 "SELECT (xpath('/row/n/text()', query_to_xml(format('SELECT count(*) AS n "
                 "FROM %s', " +
                     table + "), false, true, '')))[1]::text::bigint");
  };
  auto purge = [&] { return count(db, "SELECT taskmill.sweep_purge(604800000, 3, " + term + ")"); };
  // The undated task goes by itself; the day is detached, its first three
  // tasks' references go.
  BOOST_CHECK_EQUAL(purge(), 4);
  BOOST_CHECK_EQUAL(count(db, "SELECT count(*) FROM taskmill.tasks WHERE key LIKE 'd_'"), 0);
  BOOST_CHECK_EQUAL(count(db, "SELECT count(*) FROM taskmill.task_keys WHERE key LIKE 'd_'"), 4);
  BOOST_CHECK_EQUAL(day_rows(), 7);
  BOOST_CHECK_EQUAL(purge(), 3);
  BOOST_CHECK_EQUAL(purge(), 1);
  BOOST_CHECK_EQUAL(day_rows(), 7);
  BOOST_CHECK_EQUAL(count(db, "SELECT count(*) FROM taskmill.task_keys WHERE key LIKE 'd_'"), 0);
  BOOST_CHECK_EQUAL(purge(), 0);
  BOOST_CHECK_EQUAL(db.scalar("SELECT to_regclass(" + table + ") IS NULL"), "t");
  BOOST_CHECK_EQUAL(count(db, "SELECT count(*) FROM taskmill.stopped_day_purges"), 0);
  // Of the day's tasks' attempts, none is left; those of the task stopped
  // today are.
  BOOST_CHECK_EQUAL(count(db,
                          "SELECT count(*) FROM taskmill.attempts a WHERE NOT EXISTS "
                          "(SELECT 1 FROM taskmill.tasks t WHERE t.id = a.task_id)"),
                    0);
  BOOST_CHECK_EQUAL(db.scalar("SELECT string_agg(key, ',') FROM taskmill.tasks"), "today");
  BOOST_CHECK_EQUAL(count(db, "SELECT count(*) FROM taskmill.attempts"), 1);
  // The coming days are made ahead of them.
  BOOST_CHECK_EQUAL(
      db.scalar("SELECT to_regclass('taskmill.' || taskmill.stopped_day_table((now() AT TIME "
                "ZONE 'UTC')::date + 2)) IS NOT NULL"),
      "t");
}

BOOST_AUTO_TEST_SUITE_END()

namespace {

/// A PostgreSQL of its own for tests that crash it, and nodes as processes
/// on it (SPEC §9: losing PostgreSQL pauses a node and it retries; it never
/// exits because the database blinked).
struct blip_fixture {
  blip_fixture() {
    dir = std::filesystem::temp_directory_path() /
          ("taskmill-blip-" + std::to_string(::getpid()) + "-" + std::to_string(++instances));
    db::embedded_postgres_options opts;
    opts.dir = dir.string();
    // Durable settings: with synchronous_commit off a crash loses the last
    // commits, and a test would see work undone that the node had done.
    opts.throwaway = false;
    auto started = db::embedded_postgres::start(opts);
    BOOST_REQUIRE_MESSAGE(started, test::describe(started));
    pg.emplace(std::move(*started));
  }

  ~blip_fixture() {
    nodes.clear();
    if (pg) pg->stop();
    std::error_code ignored;
    std::filesystem::remove_all(dir, ignored);
  }

  std::vector<std::string> options(uint16_t port) const {
    auto o = fast_lease_options();
    o.push_back("api.listen=127.0.0.1:" + std::to_string(port));
    // A port the system picks for the cluster could be the API's, free
    // between a node's stop and the next one's bind of it (seen once).
    auto cluster = free_loopback_port();
    while (cluster == port) cluster = free_loopback_port();
    o.push_back("cluster.listen=127.0.0.1:" + std::to_string(cluster));
    o.push_back("node.log_level=info");
    o.push_back("database.reconnect_max=500ms");
    return o;
  }

  node_process& start_node(const std::string& name, uint16_t port,
                           std::vector<std::string> extra = {}) {
    auto o = options(port);
    o.insert(o.end(), extra.begin(), extra.end());
    return *nodes.emplace_back(std::make_unique<node_process>(binary(), name, pg->conninfo(), o));
  }

  /// The first column of the first row, on a connection of its own (kept
  /// connections do not survive a crash); nullopt while the server is away.
  std::optional<std::string> scalar(const std::string& sql) const {
    auto conn = db::connection::open(pg->conninfo(), 10s, 5s);
    if (!conn) return std::nullopt;
    auto res = conn->exec(sql);
    if (!res || res->rows() == 0) return std::nullopt;
    return res->string(0, 0);
  }

  static bool ready(uint16_t port) {
    auto res =
        http_fetch("GET", "http://127.0.0.1:" + std::to_string(port) + "/readyz", {}, {}, 2s);
    if (res && res->status != 200) BOOST_TEST_MESSAGE("not ready: " << res->body);
    return res && res->status == 200;
  }

  /// Crashes the server, keeps it down for `down`, starts it again.
  void blip(std::chrono::milliseconds down = 1s) {
    BOOST_REQUIRE(!pg->crash());
    std::this_thread::sleep_for(down);
    auto restarted = pg->restart();
    BOOST_REQUIRE_MESSAGE(!restarted, error_message(restarted));
  }

  static inline int instances = 0;
  std::filesystem::path dir;
  std::optional<db::embedded_postgres> pg;
  std::vector<std::unique_ptr<node_process>> nodes;
};

}  // namespace

BOOST_FIXTURE_TEST_SUITE(postgres_blips, blip_fixture)

BOOST_AUTO_TEST_CASE(a_node_started_while_postgres_is_down_waits_for_it) {
  BOOST_REQUIRE(!pg->crash());
  auto port = free_loopback_port();
  auto& node = start_node("n1", port);
  std::this_thread::sleep_for(3s);
  BOOST_REQUIRE_MESSAGE(node.running() && ::kill(node.pid(), 0) == 0, node.log_tail());
  BOOST_CHECK(!ready(port));
  BOOST_REQUIRE(!pg->restart());
  BOOST_REQUIRE_MESSAGE(test::eventually([&] { return ready(port); }, 30s),
                        test::later{[&](std::ostream& out) { out << node.log_tail(); }});
  // And again while it applies its settings and takes its name: a blip at
  // any instant of a start.
  BOOST_CHECK_EQUAL(node.stop(), 0);
  for (auto delay : {0ms, 50ms, 150ms, 400ms}) {
    BOOST_TEST_CONTEXT("PostgreSQL crashes " << delay.count() << " ms into the start") {
      auto& again = start_node("n1", port);
      std::this_thread::sleep_for(delay);
      blip(500ms);
      BOOST_REQUIRE_MESSAGE(test::eventually([&] { return ready(port); }, 30s),
                            test::later{[&](std::ostream& out) { out << again.log_tail(); }});
      BOOST_CHECK_EQUAL(again.stop(), 0);
    }
  }
}

BOOST_AUTO_TEST_CASE(a_task_read_while_postgres_is_away_says_why_nothing_runs) {
  auto port = free_loopback_port();
  auto& node = start_node("n1", port);
  BOOST_REQUIRE_MESSAGE(test::eventually([&] { return ready(port); }, 30s),
                        test::later{[&](std::ostream& out) { out << node.log_tail(); }});
  auto id = scalar(
      "SELECT (taskmill.submit('LATER', 'k', execute_at => now() + interval '1 hour')).task.id");
  BOOST_REQUIRE(id);
  auto url = "http://127.0.0.1:" + std::to_string(port) + "/v1/tasks/" + *id;
  auto reason = [&] {
    auto res = http_fetch("GET", url, {}, {}, 10s);
    BOOST_REQUIRE(res);
    auto doc = nlohmann::json::parse(res->body);
    const auto& waiting = res->status == 200 ? doc["waiting"] : doc["error"]["waiting"];
    return std::to_string(res->status) + " " + waiting.value("reason", "none");
  };
  BOOST_CHECK_EQUAL(reason(), "200 due_later");

  BOOST_REQUIRE(!pg->crash());
  BOOST_CHECK_EQUAL(reason(), "503 storage_unavailable");
  std::string shown;
  if (FILE* p = popen(("'" + binary() + "' show --server http://127.0.0.1:" + std::to_string(port) +
                       " " + *id + " 2>&1")
                          .c_str(),
                      "r")) {
    for (char buf[512]; auto n = fread(buf, 1, sizeof buf, p);) shown.append(buf, n);
    pclose(p);
  }
  BOOST_CHECK_MESSAGE(shown.find("waiting: storage_unavailable") != std::string::npos, shown);

  BOOST_REQUIRE(!pg->restart());
  BOOST_CHECK_MESSAGE(test::eventually([&] { return reason() == "200 due_later"; }, 30s),
                      test::later{[&](std::ostream& out) { out << node.log_tail(); }});
  BOOST_CHECK_EQUAL(node.stop(), 0);
}

BOOST_AUTO_TEST_CASE(a_node_waiting_out_its_earlier_lease_survives_a_crash) {
  auto port = free_loopback_port();
  // A long lease, so the second run waits for the first one's to pass.
  std::vector<std::string> long_lease{"heartbeat.interval=500ms", "heartbeat.missed=12"};
  auto& first = start_node("n1", port, long_lease);
  BOOST_REQUIRE_MESSAGE(test::eventually([&] { return ready(port); }, 30s),
                        test::later{[&](std::ostream& out) { out << first.log_tail(); }});
  first.kill_hard();
  auto& second = start_node("n1", port, long_lease);
  BOOST_REQUIRE(test::eventually(
      [&] { return second.log_tail().find("waiting") != std::string::npos; }, 10s));
  blip(1s);
  std::this_thread::sleep_for(1s);
  BOOST_REQUIRE_MESSAGE(::kill(second.pid(), 0) == 0, "the node exited: " << second.log_tail());
  BOOST_REQUIRE_MESSAGE(test::eventually([&] { return ready(port); }, 30s),
                        test::later{[&](std::ostream& out) { out << second.log_tail(); }});
  BOOST_CHECK_EQUAL(second.stop(), 0);
}

BOOST_AUTO_TEST_CASE(claiming_nodes_ride_out_crashes_and_lose_nothing) {
  auto port = free_loopback_port();
  auto& node = start_node("n1", port, {"types.SLEEP.executor=sleep", "types.SLEEP.max_retries=20"});
  BOOST_REQUIRE_MESSAGE(test::eventually([&] { return ready(port); }, 30s),
                        test::later{[&](std::ostream& out) { out << node.log_tail(); }});
  constexpr int n = 3000;
  BOOST_REQUIRE(
      scalar("SELECT count(taskmill.submit('SLEEP', k::text, payload => '{\"ms\": 2}', "
             "backoff_kind => 'fixed', backoff_base_ms => 10)) "
             "FROM generate_series(1, " +
             std::to_string(n) + ") k"));
  for (int i = 0; i < 3; ++i) {
    std::this_thread::sleep_for(700ms);
    blip(500ms);
  }
  std::string done;
  BOOST_REQUIRE_MESSAGE(test::eventually(
                            [&] {
                              done = scalar(
                                         "SELECT count(*) FROM taskmill.tasks WHERE status = "
                                         "'succeeded'")
                                         .value_or("?");
                              return done == std::to_string(n);
                            },
                            90s),
                        test::later{[&](std::ostream& out) {
                          out << done << " of " << n << " succeeded; " << node.log_tail();
                        }});
  BOOST_CHECK_EQUAL(scalar("SELECT count(*) FROM taskmill.attempt_history WHERE outcome = "
                           "'succeeded'")
                        .value_or("?"),
                    std::to_string(n));
  BOOST_CHECK_MESSAGE(test::eventually([&] { return ready(port); }),
                      test::later{[&](std::ostream& out) { out << node.log_tail(); }});
  BOOST_CHECK_EQUAL(node.stop(), 0);
}

BOOST_AUTO_TEST_CASE(a_stopping_node_hands_back_its_tasks_across_a_crash) {
  auto port = free_loopback_port();
  auto& node = start_node("n1", port,
                          {"types.SLEEP.executor=sleep", "node.shutdown_grace=200ms",
                           "heartbeat.interval=1s", "heartbeat.missed=10"});
  BOOST_REQUIRE_MESSAGE(test::eventually([&] { return ready(port); }, 30s),
                        test::later{[&](std::ostream& out) { out << node.log_tail(); }});
  BOOST_REQUIRE(
      scalar("SELECT count(taskmill.submit('SLEEP', k::text, payload => '{\"ms\": "
             "60000}', timeout_ms => 120000)) FROM generate_series(1, 20) k"));
  BOOST_REQUIRE(test::eventually([&] {
    return scalar("SELECT count(*) FROM taskmill.tasks WHERE status = 'running'") == "20";
  }));
  BOOST_REQUIRE(!pg->crash());
  ::kill(node.pid(), SIGTERM);
  // Longer than the drain takes (shutdown_grace), shorter than the lease.
  std::this_thread::sleep_for(3s);
  BOOST_REQUIRE(!pg->restart());
  BOOST_CHECK_EQUAL(node.stop(SIGTERM, 30s), 0);
  BOOST_TEST_MESSAGE(node.log_tail());
  BOOST_CHECK_MESSAGE(
      test::eventually([&] {
        return scalar("SELECT count(*) FROM taskmill.tasks WHERE status = 'pending'") == "20";
      }),
      test::later{[&](std::ostream& out) { out << node.log_tail(); }});
}

BOOST_AUTO_TEST_SUITE_END()

namespace {

/// A primary with a synchronous streaming standby, each a server of its
/// own, and nodes on both through libpq's multi-host connection string.
struct failover_fixture {
  failover_fixture() {
    dir = std::filesystem::temp_directory_path() /
          ("taskmill-failover-" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir);
    // Durable, as in production: a commit acknowledged is on the standby.
    db::embedded_postgres_options opts;
    opts.dir = (dir / "primary").string();
    opts.throwaway = false;
    auto started = db::embedded_postgres::start(opts);
    BOOST_REQUIRE_MESSAGE(started, test::describe(started));
    primary.emplace(std::move(*started));
    opts.dir = (dir / "standby").string();
    auto copied = primary->start_standby(opts, "standby");
    BOOST_REQUIRE_MESSAGE(copied, test::describe(copied));
    standby.emplace(std::move(*copied));
    set(*primary, "ALTER SYSTEM SET synchronous_standby_names = 'standby'");
    BOOST_REQUIRE(test::eventually([&] {
      return query(*primary,
                   "SELECT sync_state FROM pg_stat_replication WHERE application_name = "
                   "'standby'") == "sync";
    }));
    std::smatch password;
    BOOST_REQUIRE(std::regex_search(primary->conninfo(), password, std::regex{"password=(\\S+)"}));
    conninfo = "host=127.0.0.1,127.0.0.1 port=" + std::to_string(primary->port()) + "," +
               std::to_string(standby->port()) + " user=taskmill password=" + password[1].str() +
               " dbname=taskmill target_session_attrs=read-write";
  }

  ~failover_fixture() {
    nodes.clear();
    if (standby) standby->stop();
    if (primary) primary->stop();
    std::error_code ignored;
    for (const auto* pg : {&standby, &primary})
      if (*pg) std::filesystem::remove_all((*pg)->dir(), ignored);
    std::filesystem::remove_all(dir, ignored);
  }

  /// The first value `sql` answers on `pg`, read-only servers included
  /// (a node's connection would refuse them); empty when there is none or
  /// the server is away.
  static std::string query(const db::embedded_postgres& pg, const std::string& sql) {
    auto conn = session(pg);
    return query(conn.get(), sql);
  }

  /// The same on a session kept by the caller.
  static std::string query(PGconn* conn, const std::string& sql) {
    if (PQstatus(conn) != CONNECTION_OK) return {};
    std::unique_ptr<PGresult, decltype(&PQclear)> res{PQexec(conn, sql.c_str()), &PQclear};
    if (PQresultStatus(res.get()) != PGRES_TUPLES_OK || PQntuples(res.get()) == 0) return {};
    return PQgetvalue(res.get(), 0, 0);
  }

  static std::unique_ptr<PGconn, decltype(&PQfinish)> session(const db::embedded_postgres& pg) {
    return {PQconnectdb(pg.conninfo().c_str()), &PQfinish};
  }

  /// Changes a server setting at once (ALTER SYSTEM and a reload).
  static void set(const db::embedded_postgres& pg, const std::string& alter_system) {
    for (const auto& sql : {alter_system, std::string{"SELECT pg_reload_conf()"}}) {
      std::unique_ptr<PGconn, decltype(&PQfinish)> conn{PQconnectdb(pg.conninfo().c_str()),
                                                        &PQfinish};
      BOOST_REQUIRE_MESSAGE(PQstatus(conn.get()) == CONNECTION_OK, PQerrorMessage(conn.get()));
      std::unique_ptr<PGresult, decltype(&PQclear)> res{PQexec(conn.get(), sql.c_str()), &PQclear};
      auto status = PQresultStatus(res.get());
      BOOST_REQUIRE_MESSAGE(status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK,
                            sql << ": " << PQerrorMessage(conn.get()));
    }
  }

  static bool ready(uint16_t port) {
    auto res =
        http_fetch("GET", "http://127.0.0.1:" + std::to_string(port) + "/readyz", {}, {}, 2s);
    return res && res->status == 200;
  }

  /// Whether no node of `ports` is ready, asked of all at once: a probe may
  /// wait out its patience for an actor busy with the lost primary, and
  /// asked in turn, such waits would add up in a measured time.
  template <class Ports>
  static bool none_ready(const Ports& ports) {
    std::vector<std::future<bool>> answers;
    for (auto port : ports) answers.push_back(std::async(std::launch::async, ready, port));
    return std::none_of(answers.begin(), answers.end(), [](auto& a) { return a.get(); });
  }

  std::filesystem::path dir;
  std::optional<db::embedded_postgres> primary, standby;
  std::string conninfo;
  std::vector<std::unique_ptr<node_process>> nodes;
};

}  // namespace

BOOST_FIXTURE_TEST_SUITE(failover, failover_fixture)

// The primary crashes under load; the standby is promoted; the old primary
// comes back read-only, first in every node's host list, as a demoted
// primary would. Every submit a node acknowledged is on the new primary,
// no (task, attempt) reaches the executor twice, the per-second cron job
// fires each second once, and every node works on the new primary within
// the bound, none on the old one.
BOOST_AUTO_TEST_CASE(nodes_follow_a_promoted_standby_and_lose_no_acknowledged_submit) {
  test::scripted_executor executor;
  std::vector<uint16_t> ports;
  for (const auto& name : {"f1", "f2", "f3"}) {
    auto port = ports.emplace_back(free_loopback_port());
    auto options = fast_lease_options();
    for (const std::string& o :
         {"api.listen=127.0.0.1:" + std::to_string(port), std::string{"cluster.listen=127.0.0.1:0"},
          std::string{"database.reconnect_max=500ms"}, std::string{"types.WORK.executor=http"},
          "types.WORK.url=" + executor.url(), std::string{"types.WORK.max_retries=20"},
          std::string{"types.WORK.timeout=20s"}, std::string{"types.TICK.executor=noop"},
          std::string{"node.log_level=info"}})
      options.push_back(o);
    nodes.push_back(std::make_unique<node_process>(binary(), name, conninfo, options));
  }
  for (size_t i = 0; i < nodes.size(); ++i)
    BOOST_REQUIRE_MESSAGE(test::eventually([&] { return ready(ports[i]); }, 30s),
                          test::later{[&](std::ostream& out) { out << nodes[i]->log_tail(); }});
  auto job = db::connection::open(primary->conninfo(), 10s, 5s);
  BOOST_REQUIRE(job);
  BOOST_REQUIRE(job->exec(
      "SELECT taskmill.put_job('tick', '* * * * * *', 'UTC', 'TICK', NULL, NULL, NULL, NULL, "
      "NULL, NULL, NULL, NULL, true, 'any', NULL, 'allow', 'catch_up', 100, '', 'api', "
      "date_trunc('second', now()) + interval '1 s', now())"));

  // Clients submit one task at a time, round robin over the nodes, and keep
  // the keys of those acknowledged.
  std::atomic<bool> submitting{true};
  std::vector<std::string> acknowledged;
  int refused = 0;
  std::thread client{[&] {
    for (int i = 0; submitting; ++i) {
      auto key = "f-" + std::to_string(i);
      auto res = http_fetch(
          "POST", "http://127.0.0.1:" + std::to_string(ports[i % 3]) + "/v1/tasks",
          R"({"type": "WORK", "key": ")" + key + R"(", "payload": {"delay_ms": 100}})", {}, 5s);
      if (res && (res->status == 201 || res->status == 200)) {
        acknowledged.push_back(key);
      } else {
        ++refused;
        std::this_thread::sleep_for(10ms);
      }
    }
  }};
  std::this_thread::sleep_for(3s);

  BOOST_REQUIRE(!primary->crash());
  // A failover manager takes a moment to decide.
  std::this_thread::sleep_for(1s);
  auto promoted = standby->promote();
  BOOST_REQUIRE_MESSAGE(!promoted, error_message(promoted));
  auto promoted_at = std::chrono::steady_clock::now();
  // The old primary comes back read-only while the nodes fail over; its
  // restart's own time is not theirs.
  auto demoted = std::async(std::launch::async,
                            [&] { return primary->restart({"default_transaction_read_only=on"}); });

  auto working_on_standby = [&] {
    return query(*standby,
                 "SELECT count(*) FROM taskmill.nodes WHERE stopped_at IS NULL AND "
                 "heartbeat_at > now() - interval '300 ms'") == "3" &&
           std::all_of(ports.begin(), ports.end(), ready);
  };
  BOOST_REQUIRE_MESSAGE(test::eventually(working_on_standby, 30s),
                        test::later{[&](std::ostream& out) {
                          for (auto& n : nodes) out << n->log_tail();
                        }});
  std::chrono::duration<double> recovered = std::chrono::steady_clock::now() - promoted_at;
  BOOST_TEST_MESSAGE("every node works on the promoted standby " << recovered.count()
                                                                 << " s after its promotion");
  BOOST_CHECK_LE(recovered.count(), 5.0);
  auto demoted_error = demoted.get();
  BOOST_REQUIRE_MESSAGE(!demoted_error, error_message(demoted_error));
  BOOST_CHECK(test::eventually(working_on_standby, 30s));
  std::this_thread::sleep_for(2s);

  // The new primary is demoted in place, its sessions kept (read-only, as
  // a standby is): each node's writes are refused, it lets go of the
  // server and waits for one that takes writes; lifted, it comes back.
  // Counted on a session of the test's own, kept: one connected for each
  // count took half a second beside the nodes' reconnecting, which the time
  // to let go below included.
  auto counting = session(*standby);
  auto sessions = [&](const std::string& which) {
    return query(
        counting.get(),
        "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'taskmill' AND " + which);
  };
  // A listener's last statement is its LISTEN or its probe.
  const std::string listening =
      "(query LIKE 'LISTEN%' OR query = 'SELECT current_setting(''transaction_read_only'')')";
  BOOST_REQUIRE(std::all_of(ports.begin(), ports.end(), ready));
  set(*standby, "ALTER SYSTEM SET default_transaction_read_only = on");
  auto demoted_at = std::chrono::steady_clock::now();
  // The first refused write of a node tells it: it is not ready until a
  // server takes writes. Its listeners, which never write, ask every second.
  // An idle connection is let go at its next statement, which is refused.
  BOOST_CHECK_MESSAGE(
      test::eventually([&] { return none_ready(ports) && sessions(listening) == "0"; }, 10s),
      sessions(listening) << " listeners are left on the demoted server");
  std::chrono::duration<double> let_go = std::chrono::steady_clock::now() - demoted_at;
  BOOST_TEST_MESSAGE("every node stopped, and its listeners let go of the demoted server, within "
                     << let_go.count() << " s; " << sessions("true")
                     << " idle node sessions are still there");
  BOOST_CHECK_LE(let_go.count(), 3.0);
  set(*standby, "ALTER SYSTEM RESET default_transaction_read_only");
  BOOST_REQUIRE_MESSAGE(test::eventually(working_on_standby, 30s),
                        test::later{[&](std::ostream& out) {
                          for (auto& n : nodes) out << n->log_tail();
                        }});
  std::this_thread::sleep_for(2s);
  submitting = false;
  client.join();
  BOOST_TEST_MESSAGE(acknowledged.size()
                     << " submits acknowledged, " << refused << " refused or unanswered");
  BOOST_REQUIRE_GE(acknowledged.size(), 100u);

  auto unfinished = [&] {
    return query(*standby,
                 "SELECT count(*) FROM taskmill.tasks WHERE type = 'WORK' AND status <> "
                 "'succeeded'");
  };
  BOOST_REQUIRE_MESSAGE(test::eventually([&] { return unfinished() == "0"; }, 60s),
                        unfinished() << " tasks unfinished");
  std::string keys = "{";
  for (const auto& k : acknowledged) keys += (keys.size() > 1 ? "," : "") + k;
  keys += "}";
  auto missing = db::connection::open(standby->conninfo(), 10s, 5s)
                     ->exec(
                         "SELECT count(*) FROM unnest($1::text[]) k WHERE NOT EXISTS "
                         "(SELECT 1 FROM taskmill.tasks WHERE type = 'WORK' AND key = k)",
                         {keys});
  BOOST_REQUIRE(missing);
  BOOST_CHECK_EQUAL(missing->int64(0, 0), 0);
  BOOST_CHECK_EQUAL(deliveries_twice(executor), 0);

  // Each second from the job's first firing to its last fired, once: the
  // seconds of the outage were caught up on the new primary.
  auto firings = query(*standby,
                       "SELECT count(*) || ' ' || count(DISTINCT fire_at) || ' ' || "
                       "(extract(epoch FROM max(fire_at) - min(fire_at))::bigint + 1) "
                       "FROM taskmill.job_firings WHERE job = 'tick'");
  std::istringstream in{firings};
  int64_t total = 0, distinct = 0, seconds = 0;
  in >> total >> distinct >> seconds;
  BOOST_TEST_MESSAGE(total << " firings over " << seconds << " s");
  BOOST_CHECK_EQUAL(total, distinct);
  BOOST_CHECK_EQUAL(total, seconds);
  BOOST_CHECK_GE(seconds, 8);

  // Nothing of the nodes stayed on the old primary, and none exited.
  BOOST_CHECK_EQUAL(
      query(*primary, "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'taskmill'"),
      "0");
  for (auto& n : nodes) BOOST_CHECK_MESSAGE(::kill(n->pid(), 0) == 0, n->log_tail());
}

BOOST_AUTO_TEST_SUITE_END()

// The lead is a lease in taskmill.leadership; every duty of the leader is
// fenced by its term (storage/sql/nodes.sql).
BOOST_AUTO_TEST_SUITE(leadership)

BOOST_AUTO_TEST_CASE(the_lead_passes_only_once_expired_and_a_deposed_duty_changes_nothing) {
  test::task_database db{"leaselead"};
  auto lead = [&](const std::string& node, bool want, int lease_ms) {
    return db.scalar("SELECT taskmill.lead($1, 'i1', $2::boolean, $3)",
                     {node, want ? "true" : "false", std::to_string(lease_ms)});
  };
  auto a_term = lead("a", true, 400);
  BOOST_CHECK_NE(a_term, "0");
  BOOST_CHECK_EQUAL(lead("b", true, 400), "0");
  BOOST_CHECK_EQUAL(lead("a", true, 400), a_term);
  // A node silent for an hour: what a sweep would declare dead.
  db.exec("SELECT taskmill.register_node('gone', 'g1', '', 60000, NULL)");
  db.exec("UPDATE taskmill.nodes SET heartbeat_at = now() - interval '1 hour'");
  std::this_thread::sleep_for(500ms);
  auto b_term = lead("b", true, 60000);
  BOOST_CHECK_EQUAL(std::stoll(b_term), std::stoll(a_term) + 1);
  BOOST_CHECK_EQUAL(lead("a", true, 400), "0");
  // a's sweep reaching the database late is refused and changes nothing.
  auto refused = db.error_of("SELECT taskmill.sweep_lost(1000, 100, " + a_term + ")");
  BOOST_CHECK_MESSAGE(
      refused.find("not the leader: term " + a_term + " is over") != std::string::npos, refused);
  BOOST_CHECK_EQUAL(db.scalar("SELECT stopped_at IS NULL FROM taskmill.nodes WHERE name = 'gone'"),
                    "t");
  // The same for a firing of cron and an alert pass; and without a term.
  BOOST_CHECK(db.error_of("SELECT * FROM taskmill.fire_jobs('{}', '{}', '{}', '{}', '{}', '{}', "
                          "1000, " +
                          a_term + ")")
                  .find("not the leader") != std::string::npos);
  BOOST_CHECK(db.error_of("SELECT * FROM taskmill.take_alert_deliveries(10, 1000, " + a_term + ")")
                  .find("not the leader") != std::string::npos);
  BOOST_CHECK(db.error_of("SELECT taskmill.sweep_deadlines(100)").find("term none") !=
              std::string::npos);
  db.exec("SELECT taskmill.sweep_lost(1000, 100, " + b_term + ")");
  BOOST_CHECK_EQUAL(db.scalar("SELECT stopped_at IS NULL FROM taskmill.nodes WHERE name = 'gone'"),
                    "f");
  // Given up, the lead passes at once; a node of the release before the
  // lease never leads.
  BOOST_CHECK_EQUAL(lead("b", false, 0), "0");
  BOOST_CHECK_EQUAL(std::stoll(lead("a", true, 400)), std::stoll(b_term) + 1);
  BOOST_CHECK_EQUAL(db.scalar("SELECT taskmill.lead(true)"), "f");
}

// Four nodes take the lead from each other all the time (leases of 15 ms,
// stalls up to 25 ms before their duties); each writes a log row under its
// term from every duty it runs, with a pause between the fence and the
// write. Ordered as
// the rows were written, the terms never go back: no duty of a deposed
// leader ran after a new leader's.
BOOST_AUTO_TEST_CASE(racing_leaders_never_act_under_two_terms_at_once) {
  test::task_database db{"leaserace"};
  db.exec("CREATE TABLE public.duty_log (seq bigserial PRIMARY KEY, term bigint NOT NULL)");
  std::atomic<int> written{0}, fenced{0}, terms_taken{0};
  std::vector<std::thread> nodes;
  // At least 4 s, and on a loaded machine until the races counted below
  // have happened.
  auto until = std::chrono::steady_clock::now() + 4s;
  auto deadline = until + 26s;
  auto racing = [&] {
    auto now = std::chrono::steady_clock::now();
    return now < until || (now < deadline && (written < 150 || fenced == 0 || terms_taken < 30));
  };
  for (int n = 0; n < 4; ++n)
    nodes.emplace_back([&, n] {
      auto conn = db.connect();
      std::mt19937 rng{static_cast<unsigned>(n + 1)};
      int64_t last_term = 0;
      while (racing()) {
        auto led = conn.exec("SELECT taskmill.lead($1, 'i', true, 15)", {"n" + std::to_string(n)});
        BOOST_REQUIRE_MESSAGE(led, test::describe(led));
        auto term = led->int64(0, 0);
        if (term != 0 && term != last_term) ++terms_taken;
        if (term != 0) last_term = term;
        // Now and then past the lease, as a leader that stalls.
        std::this_thread::sleep_for(std::chrono::milliseconds{rng() % 25});
        for (int duty = 0; term != 0 && duty < 3; ++duty) {
          auto done = conn.exec(
              "WITH f AS (SELECT taskmill.fence($1::bigint)), "
              "s AS (SELECT pg_sleep(random() * 0.015) FROM f) "
              "INSERT INTO public.duty_log (term) SELECT $1::bigint FROM s",
              {std::to_string(term)});
          if (done)
            ++written;
          else
            ++fenced;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds{rng() % 30});
      }
    });
  for (auto& t : nodes) t.join();
  BOOST_TEST_MESSAGE(written << " duties written, " << fenced << " fenced, " << terms_taken
                             << " terms taken");
  BOOST_CHECK_GT(written.load(), 100);
  BOOST_CHECK_GT(fenced.load(), 0);
  BOOST_CHECK_GT(terms_taken.load(), 20);
  BOOST_CHECK_EQUAL(db.scalar("SELECT count(*) FROM (SELECT term, lag(term) OVER (ORDER BY seq) "
                              "AS before FROM public.duty_log) l WHERE term < before"),
                    "0");
}

BOOST_AUTO_TEST_SUITE_END()
