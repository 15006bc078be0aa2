// SPEC §6 alerts: the rules in SQL (dead tasks, failure rates, missed and
// skipped firings, overdue types), racing alert passes, and a real node
// delivering to a real HTTP receiver that fails first, across a kill -9.
#define BOOST_TEST_MODULE alerts
#include <boost/test/unit_test.hpp>

#include "actors/http/http_server.hpp"
#include "messages/errors.hpp"
#include "tests/support/nodes.hpp"
#include "tools/http_fetch.hpp"
#include "tools/node_process.hpp"

#include <nlohmann/json.hpp>

#include <atomic>
#include <mutex>
#include <thread>

using namespace taskmill;
using namespace std::chrono_literals;
using nlohmann::json;

namespace {

const std::string default_rules =
    R"({"default": {"dead_task": true, "failure_rate": 0.05, "missed_firings": true,
                    "pending_after_ms": 3600000}, "types": {}, "jobs": {}})";

/// One alert pass as the leader makes it; answers the kinds raised, in order.
std::string raise(const test::task_database& db, const std::string& rules = default_rules,
                  const std::string& webhooks = "{}") {
  return db.scalar(
      "SELECT coalesce(string_agg(kind, ',' ORDER BY id), '') FROM "
      "taskmill.raise_alerts($1::jsonb, $2::text[], 100, true, $3::bigint)",
      {rules, webhooks, db.seize_lead()});
}

/// Submits a task that dies at its first failure.
int64_t submit(const test::task_database& db, const std::string& key, const std::string& batch = "",
               const std::string& type = "T") {
  return std::stoll(
      db.scalar("SELECT (s.task).id FROM taskmill.submit($1, $2, max_retries => 0, "
                "batch => nullif($3, '')) s",
                {type, key, batch}));
}

/// Claims every due task and reports `outcome` for the tasks whose key is
/// in `failing`, success for the others.
void run_all(const test::task_database& db, const std::set<std::string>& failing) {
  for (const auto& t : db.claim(1000))
    BOOST_REQUIRE(
        db.complete(t.id, t.attempt, failing.count(t.key) ? "fail" : "succeeded", "boom"));
}

std::string count(const test::task_database& db, const std::string& where) {
  return db.scalar("SELECT count(*) FROM taskmill.alerts WHERE " + where);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(rules)

BOOST_AUTO_TEST_CASE(a_dead_task_is_alerted_once_unless_its_rule_says_not) {
  test::task_database db{"alertdead"};
  auto id = submit(db, "a");
  submit(db, "b", "", "QUIET");
  run_all(db, {"a", "b"});
  auto quiet = R"({"default": {"dead_task": true}, "types": {"QUIET": {"dead_task": false}}})";
  BOOST_CHECK_EQUAL(raise(db, quiet, R"({http://h1/a,http://h2/b})"), "dead_task");
  BOOST_CHECK_EQUAL(raise(db, quiet), "");
  BOOST_CHECK_EQUAL(db.scalar("SELECT subject || ' | ' || message || ' | ' || (details->>'error') "
                              "FROM taskmill.alerts"),
                    "task " + std::to_string(id) + " attempt 1 | task " + std::to_string(id) +
                        " (T a) is dead after attempt 1: boom | boom");
  // One delivery per webhook, due now.
  BOOST_CHECK_EQUAL(db.scalar("SELECT string_agg(url, ',' ORDER BY url) FROM "
                              "taskmill.alert_deliveries WHERE next_at <= now() AND attempts = 0"),
                    "http://h1/a,http://h2/b");
  // Retried by hand and dead again: a new death, a new alert.
  db.exec("SELECT * FROM taskmill.retry($1::bigint)", {std::to_string(id)});
  run_all(db, {"a"});
  BOOST_CHECK_EQUAL(raise(db, quiet), "dead_task");
  BOOST_CHECK_EQUAL(count(db, "kind = 'dead_task'"), "2");
}

BOOST_AUTO_TEST_CASE(deaths_by_timeout_lost_lease_and_deadline_are_alerted) {
  test::task_database db{"alertways"};
  submit(db, "timeout");
  submit(db, "lost");
  db.exec(
      "UPDATE taskmill.tasks SET timeout_ms = 1 WHERE key = 'timeout'; "
      "INSERT INTO taskmill.nodes (name, incarnation, heartbeat_at) "
      "VALUES ('gone', 'x', now() - interval '1 hour')");
  db.claim(10, "gone");
  db.exec("UPDATE taskmill.tasks SET picked_by = 'n1' WHERE key = 'timeout'");
  db.exec(
      "INSERT INTO taskmill.nodes (name, incarnation) VALUES ('n1', 'y'); "
      "UPDATE taskmill.tasks SET started_at = now() - interval '1 minute' WHERE key = 'timeout'");
  db.call("submit('T', 'deadline', execute_at => now() + interval '1 hour')");
  db.exec(
      "UPDATE taskmill.tasks SET deadline_at = now() - interval '1 second' "
      "WHERE key = 'deadline'");
  BOOST_CHECK_EQUAL(db.scalar("SELECT taskmill.sweep_lost(5000, 100, $1) + "
                              "taskmill.sweep_timeouts(0, 100, $1) + "
                              "taskmill.sweep_deadlines(100, $1)",
                              {db.seize_lead()}),
                    "3");
  BOOST_CHECK_EQUAL(raise(db), "dead_task,dead_task,dead_task");
  BOOST_CHECK_EQUAL(
      db.scalar("SELECT string_agg(details->>'key', ',' ORDER BY details->>'key') FROM "
                "taskmill.alerts"),
      "deadline,lost,timeout");
}

BOOST_AUTO_TEST_CASE(a_batch_is_judged_once_it_finishes_against_its_failure_rate) {
  test::task_database db{"alertrate"};
  // 1 of 20 dead is 5%: not above the default threshold.
  for (int i = 0; i < 20; ++i) submit(db, "low" + std::to_string(i), "low");
  // 1 of 10 dead is 10%; one task waits until later, so the batch is open.
  for (int i = 0; i < 9; ++i) submit(db, "high" + std::to_string(i), "high");
  db.call("submit('T', 'high-late', batch => 'high', execute_at => now() + interval '1 hour')");
  run_all(db, {"low0", "high0"});
  BOOST_CHECK_EQUAL(raise(db), "dead_task,dead_task");
  BOOST_CHECK_EQUAL(count(db, "kind = 'failure_rate'"), "0");
  BOOST_CHECK_EQUAL(db.scalar("SELECT string_agg(batch, ',') FROM taskmill.alert_batches"), "high");
  db.exec("UPDATE taskmill.tasks SET execute_at = now() WHERE key = 'high-late'");
  run_all(db, {});
  BOOST_CHECK_EQUAL(raise(db), "failure_rate");
  BOOST_CHECK_EQUAL(raise(db), "");
  BOOST_CHECK_EQUAL(db.scalar("SELECT subject || ' | ' || message FROM taskmill.alerts WHERE "
                              "kind = 'failure_rate'"),
                    "batch high | batch high finished with 1 of 10 tasks dead (10.0%, above 5.0%)");
  // Rerun and failing again does not raise the batch's alert twice.
  db.exec("SELECT taskmill.retry_batch('high')");
  run_all(db, {"high0"});
  BOOST_CHECK_EQUAL(raise(db), "dead_task");
  BOOST_CHECK_EQUAL(count(db, "kind = 'failure_rate'"), "1");
}

// SPEC §4: the records a batch's tasks reported (progress: processed,
// failed) are judged against record_failure_rate once the batch finished,
// though every task of it succeeded; a batch under the rate is not.
BOOST_AUTO_TEST_CASE(a_batch_is_judged_on_its_failed_records_once_it_finishes) {
  test::task_database db{"alertrecords"};
  auto rules = R"({"default": {"dead_task": true, "record_failure_rate": 0.05},
                   "types": {}, "jobs": {}})";
  for (const auto* batch : {"clean", "dirty"})
    for (int i = 0; i < 2; ++i) submit(db, std::string{batch} + std::to_string(i), batch);
  auto report = [&](const test::task_row& t, int processed, int failed) {
    BOOST_CHECK_EQUAL(
        db.scalar("SELECT applied::text FROM taskmill.report_progress(ARRAY[$1::bigint], "
                  "ARRAY[$2::int], ARRAY[NULL::real], ARRAY[$3::bigint], ARRAY[$4::bigint], "
                  "ARRAY[NULL])",
                  {std::to_string(t.id), std::to_string(t.attempt), std::to_string(processed),
                   std::to_string(failed)}),
        "true");
  };
  auto claimed = db.claim(10);
  BOOST_REQUIRE_EQUAL(claimed.size(), 4u);
  for (const auto& t : claimed) {
    // dirty: 2 x (100 processed, 6 failed) is 6%; clean: 1 x 4 failed of 100.
    if (t.key.rfind("dirty", 0) == 0)
      report(t, 100, 6);
    else
      report(t, 100, t.key == "clean0" ? 4 : 0);
  }
  BOOST_CHECK_EQUAL(raise(db, rules), "");
  for (const auto& t : claimed) BOOST_REQUIRE(db.complete(t.id, t.attempt, "succeeded"));
  BOOST_CHECK_EQUAL(raise(db, rules), "record_failure_rate");
  BOOST_CHECK_EQUAL(db.scalar("SELECT subject || ' | ' || message FROM taskmill.alerts"),
                    "batch dirty | batch dirty finished with 12 of 200 records failed (6.0%, "
                    "above 5.0%)");
  BOOST_CHECK_EQUAL(db.scalar("SELECT count(*) FROM taskmill.alert_batches"), "0");
  BOOST_CHECK_EQUAL(raise(db, rules), "");
}

BOOST_AUTO_TEST_CASE(a_type_overdue_beyond_its_bound_is_alerted_once_while_it_lasts) {
  test::task_database db{"alertoverdue"};
  auto rules = R"({"default": {"pending_after_ms": 0},
                   "types": {"SLOW": {"pending_after_ms": 60000}}})";
  db.call("submit('SLOW', 'a', execute_at => now() - interval '2 minutes')");
  db.call("submit('SLOW', 'b', execute_at => now() - interval '30 seconds')");
  db.call("submit('OTHER', 'c', execute_at => now() - interval '1 day')");
  BOOST_CHECK_EQUAL(raise(db, rules), "pending_too_old");
  BOOST_CHECK_EQUAL(raise(db, rules), "");
  BOOST_CHECK_EQUAL(db.scalar("SELECT type || ' ' || (details->>'bound_ms') FROM taskmill.alerts"),
                    "SLOW 60000");
  // Its old task ran: the episode ends; the next overdue task starts another.
  auto claimed = db.claim(1);
  BOOST_REQUIRE_EQUAL(claimed.size(), 1u);
  BOOST_CHECK_EQUAL(claimed[0].key, "c");
  db.exec("DELETE FROM taskmill.tasks WHERE key = 'a'");
  BOOST_CHECK_EQUAL(raise(db, rules), "");
  BOOST_CHECK_EQUAL(db.scalar("SELECT count(*) FROM taskmill.overdue_types"), "0");
  db.exec("UPDATE taskmill.tasks SET execute_at = now() - interval '5 minutes' WHERE key = 'b'");
  BOOST_CHECK_EQUAL(raise(db, rules), "pending_too_old");
  BOOST_CHECK_EQUAL(count(db, "kind = 'pending_too_old'"), "2");
}

BOOST_AUTO_TEST_CASE(missed_and_skipped_firings_are_alerted_per_firing) {
  test::task_database db{"alertfirings"};
  db.exec(
      "SELECT taskmill.put_job('nightly', '0 3 * * *', 'UTC', 'T', NULL, NULL, NULL, NULL, "
      "NULL, NULL, NULL, NULL, true, 'any', NULL, 'skip', 'skip', 10, '', 'api', "
      "'2026-01-01T03:00:00Z', now())");
  auto fire = [&](const std::string& at, const std::string& next, bool missed) {
    return db.scalar(
        "SELECT outcome FROM taskmill.fire_jobs(ARRAY['nightly'], ARRAY[$1::timestamptz], "
        "ARRAY['scheduled'], ARRAY[$3::boolean], ARRAY[$1::timestamptz], "
        "ARRAY[$2::timestamptz], 5000, $4::bigint)",
        {at, next, missed ? "true" : "false", db.seize_lead()});
  };
  BOOST_CHECK_EQUAL(fire("2026-01-01T03:00:00Z", "2026-01-02T03:00:00Z", true), "missed");
  BOOST_CHECK_EQUAL(fire("2026-01-02T03:00:00Z", "2026-01-03T03:00:00Z", false), "fired");
  BOOST_CHECK_EQUAL(fire("2026-01-03T03:00:00Z", "2026-01-04T03:00:00Z", false), "skipped");
  BOOST_CHECK_EQUAL(raise(db), "firing_missed,firing_skipped");
  BOOST_CHECK_EQUAL(raise(db), "");
  BOOST_CHECK_EQUAL(db.scalar("SELECT string_agg(subject, ',' ORDER BY id) FROM taskmill.alerts"),
                    "firing nightly@2026-01-01T03:00:00Z,firing nightly@2026-01-03T03:00:00Z");
  // The firing's dead task is judged by the job's rule, which wins over the
  // type's: this job's failures are not alerted.
  auto job_quiet = R"({"default": {"dead_task": true, "failure_rate": 0.05},
                       "types": {"T": {"dead_task": true}},
                       "jobs": {"nightly": {"dead_task": false, "failure_rate": 1}}})";
  for (const auto& t : db.claim(10)) BOOST_REQUIRE(db.complete(t.id, t.attempt, "fail", "x"));
  BOOST_CHECK_EQUAL(raise(db, job_quiet), "");
  BOOST_CHECK_EQUAL(db.scalar("SELECT count(*) FROM taskmill.alert_batches"), "0");
}

BOOST_AUTO_TEST_CASE(racing_alert_passes_raise_each_alert_once) {
  test::task_database db{"alertrace"};
  constexpr int tasks = 400;
  constexpr int passers = 4;
  for (int i = 0; i < tasks; ++i) submit(db, "k" + std::to_string(i), "b" + std::to_string(i % 40));
  std::atomic<bool> dying{true};
  std::atomic<int> raised{0};
  std::vector<std::thread> threads;
  // Tasks die in small groups while four passes of one leader run at once
  // (a pass that a new one overtakes) and take deliveries.
  auto term = db.seize_lead();
  threads.emplace_back([&] {
    auto conn = db.connect();
    for (int round = 0; round < tasks / 10; ++round) {
      auto claimed = conn.exec(
          "UPDATE taskmill.tasks SET status = 'running', attempt = 1, picked_by = 'n', "
          "started_at = now() WHERE id IN (SELECT id FROM taskmill.tasks WHERE status = "
          "'pending' ORDER BY id LIMIT 10)");
      BOOST_REQUIRE_MESSAGE(claimed, test::describe(claimed));
      auto done = conn.exec(
          "WITH r AS (SELECT array_agg(id ORDER BY id) AS ids, array_agg(1) AS attempts, "
          "array_agg(CASE WHEN id % 3 = 0 THEN 'fail' ELSE 'succeeded' END ORDER BY id) AS "
          "outcomes, array_agg(NULL::jsonb) AS results, array_agg('e'::text) AS errors FROM "
          "taskmill.tasks WHERE status = 'running') "
          "SELECT count(*) FROM r, taskmill.complete_many(r.ids, r.attempts, r.outcomes, "
          "r.results, r.errors, 'n')");
      BOOST_REQUIRE_MESSAGE(done, test::describe(done));
    }
    dying = false;
  });
  for (int p = 0; p < passers; ++p)
    threads.emplace_back([&] {
      auto conn = db.connect();
      bool last = false;
      while (!last) {
        last = !dying;
        auto res = conn.exec(
            "SELECT count(*) FROM taskmill.raise_alerts($1::jsonb, '{http://w/1,http://w/2}', "
            "17, true, $2::bigint)",
            {default_rules, term});
        BOOST_REQUIRE_MESSAGE(res, test::describe(res));
        raised += static_cast<int>(res->int64(0, 0));
        auto taken = conn.exec(
            "SELECT count(*) FROM taskmill.take_alert_deliveries(13, 60000, $1::bigint)", {term});
        BOOST_REQUIRE_MESSAGE(taken, test::describe(taken));
      }
    });
  for (auto& t : threads) t.join();
  while (raise(db) != "") {
  }
  auto dead = db.scalar("SELECT count(*) FROM taskmill.tasks WHERE status = 'dead'");
  BOOST_CHECK_EQUAL(count(db, "kind = 'dead_task'"), dead);
  BOOST_CHECK_EQUAL(db.scalar("SELECT count(DISTINCT task_id) FROM taskmill.alerts"), dead);
  // Every batch finished with a third dead: one failure-rate alert each.
  BOOST_CHECK_EQUAL(count(db, "kind = 'failure_rate'"), "40");
  BOOST_CHECK_EQUAL(db.scalar("SELECT count(*) FROM taskmill.alert_deliveries"),
                    std::to_string(2 * std::stoi(count(db, "true"))));
  BOOST_CHECK_EQUAL(db.scalar("SELECT count(*) FROM taskmill.alert_inbox"), "0");
  BOOST_CHECK_GE(raised.load(), 1);
}

BOOST_AUTO_TEST_SUITE_END()

namespace {

/// A webhook receiver: answers 503 to its first `fail_first` requests (and
/// while told to), then 200; records every request.
class webhook_receiver {
 public:
  struct hit {
    int status;
    json body;
    std::string idempotency_key;
  };

  explicit webhook_receiver(int fail_first) : fail_first_(fail_first) {
    auto started =
        http_server::start("127.0.0.1", 0, 1 << 20,
                           [this](http_request req, http_reply reply) { reply(handle(req)); });
    BOOST_REQUIRE_MESSAGE(started, test::describe(started));
    server_ = std::move(*started);
  }

  std::string url() const {
    return "http://127.0.0.1:" + std::to_string(server_->port()) + "/hooks/taskmill";
  }

  void set_failing(bool failing) {
    std::lock_guard<std::mutex> guard{mtx_};
    failing_ = failing;
  }

  std::vector<hit> hits() {
    std::lock_guard<std::mutex> guard{mtx_};
    return hits_;
  }

 private:
  http_response handle(const http_request& req) {
    std::lock_guard<std::mutex> guard{mtx_};
    int status = failing_ || static_cast<int>(hits_.size()) < fail_first_ ? 503 : 200;
    hits_.push_back({status, json::parse(req.body, nullptr, false), req.header("idempotency-key")});
    return {status, "application/json", "{}"};
  }

  int fail_first_;
  bool failing_ = false;
  std::mutex mtx_;
  std::vector<hit> hits_;
  std::unique_ptr<http_server> server_;
};

json get_json(const std::string& url) {
  auto res = http_fetch("GET", url);
  BOOST_REQUIRE_MESSAGE(res, test::describe(res));
  BOOST_REQUIRE_MESSAGE(res->status == 200, url << ": " << res->status << " " << res->body);
  return json::parse(res->body);
}

struct alert_node_fixture : test::nodes_fixture {
  alert_node_fixture() : nodes_fixture("alertnode") {}
};

}  // namespace

BOOST_FIXTURE_TEST_SUITE(node, alert_node_fixture)

BOOST_AUTO_TEST_CASE(an_alert_is_stored_listed_counted_and_delivered_through_failures) {
  webhook_receiver receiver{3};
  auto cfg = test::test_node_config("alerting");
  cfg.alerts.webhooks = {receiver.url()};
  cfg.alerts.interval = 50ms;
  cfg.alerts.delivery_backoff = 50ms;
  auto& node = start(cfg);
  auto api = api_url(node);
  auto submitted = http_fetch("POST", api + "/v1/tasks",
                              R"({"type": "FAIL", "key": "doomed", "max_retries": 0})");
  BOOST_REQUIRE(submitted && submitted->status == 200);
  BOOST_REQUIRE(test::eventually(
      [&] {
        auto hits = receiver.hits();
        return !hits.empty() && hits.back().status == 200;
      },
      30s));
  auto hits = receiver.hits();
  BOOST_REQUIRE_EQUAL(hits.size(), 4u);
  for (const auto& h : hits) {
    BOOST_CHECK_EQUAL(h.body["kind"], "dead_task");
    BOOST_CHECK_EQUAL(h.body["details"]["key"], "doomed");
    BOOST_CHECK_EQUAL(h.idempotency_key, "taskmill-alert-" + h.body["id"].dump());
  }
  // The receiver has answered before the node records the delivery.
  json listed;
  BOOST_REQUIRE(test::eventually(
      [&] {
        listed = get_json(api + "/v1/alerts");
        return listed["alerts"].size() == 1u && listed["alerts"][0]["deliveries"].size() == 1u &&
               !listed["alerts"][0]["deliveries"][0]["delivered_at"].is_null();
      },
      30s));
  const auto& alert = listed["alerts"][0];
  BOOST_CHECK_EQUAL(alert["kind"], "dead_task");
  BOOST_CHECK_EQUAL(alert["type"], "FAIL");
  BOOST_REQUIRE_EQUAL(alert["deliveries"].size(), 1u);
  BOOST_CHECK_EQUAL(alert["deliveries"][0]["attempts"], 4);
  BOOST_CHECK(!alert["deliveries"][0]["delivered_at"].is_null());
  BOOST_CHECK(alert["deliveries"][0]["next_at"].is_null());
  // since= takes an alert id or a time.
  BOOST_CHECK_EQUAL(get_json(api + "/v1/alerts?since=" + alert["id"].dump())["alerts"].size(), 0u);
  BOOST_CHECK_EQUAL(
      get_json(api + "/v1/alerts?since=2026-01-01T00:00:00Z&limit=5")["alerts"].size(), 1u);
  auto bad = http_fetch("GET", api + "/v1/alerts?since=yesterday");
  BOOST_REQUIRE(bad);
  BOOST_CHECK_EQUAL(bad->status, 400);
  BOOST_CHECK_MESSAGE(bad->body.find("since") != std::string::npos, bad->body);
  auto metrics = http_fetch("GET", api + "/metrics");
  BOOST_REQUIRE(metrics && metrics->status == 200);
  BOOST_CHECK_MESSAGE(
      metrics->body.find("taskmill_alerts_total{kind=\"dead_task\"} 1") != std::string::npos,
      metrics->body);
  BOOST_CHECK_MESSAGE(
      metrics->body.find("taskmill_alert_deliveries{state=\"delivered\"} 1") != std::string::npos,
      metrics->body);
  // Raised once: nothing more arrives.
  std::this_thread::sleep_for(300ms);
  BOOST_CHECK_EQUAL(receiver.hits().size(), 4u);
}

BOOST_AUTO_TEST_CASE(a_delivery_gives_up_after_its_attempts) {
  webhook_receiver receiver{1000};
  auto cfg = test::test_node_config("giving-up");
  cfg.alerts.webhooks = {receiver.url()};
  cfg.alerts.interval = 50ms;
  cfg.alerts.delivery_backoff = 20ms;
  cfg.alerts.delivery_attempts = 3;
  auto& node = start(cfg);
  auto submitted = http_fetch("POST", api_url(node) + "/v1/tasks",
                              R"({"type": "FAIL", "key": "doomed", "max_retries": 0})");
  BOOST_REQUIRE(submitted && submitted->status == 200);
  BOOST_REQUIRE(test::eventually(
      [&] {
        return db.scalar(
                   "SELECT count(*) FROM taskmill.alert_deliveries WHERE next_at IS NULL "
                   "AND delivered_at IS NULL") == "1";
      },
      30s));
  std::this_thread::sleep_for(200ms);
  BOOST_CHECK_EQUAL(receiver.hits().size(), 3u);
  BOOST_CHECK_EQUAL(
      db.scalar("SELECT attempts || ' ' || last_error FROM taskmill.alert_deliveries"),
      "3 HTTP 503");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(processes)

// The node delivering an alert is killed (-9) while its receiver fails; a
// node started afterwards delivers it.
BOOST_AUTO_TEST_CASE(delivery_survives_a_node_killed_while_delivering) {
  const char* binary = std::getenv("TASKMILL_BINARY");
  BOOST_REQUIRE_MESSAGE(binary, "TASKMILL_BINARY is not set: run the tests through ctest");
  test::task_database db{"alertkill"};
  webhook_receiver receiver{0};
  receiver.set_failing(true);
  std::vector<std::string> options{
      "api.listen=\"127.0.0.1:0\"",     "alerts.webhooks=[\"" + receiver.url() + "\"]",
      "alerts.interval=\"50ms\"",       "alerts.delivery_backoff=\"100ms\"",
      "alerts.delivery_timeout=\"1s\"", "heartbeat.interval=\"200ms\"",
      "types.DOOMED.executor=\"fail\"", "types.DOOMED.max_retries=0"};
  auto first = std::make_unique<node_process>(binary, "a1", db.conninfo(), options);
  BOOST_REQUIRE(test::eventually(
      [&] {
        return db.scalar(
                   "SELECT count(*) FROM taskmill.nodes WHERE leader AND stopped_at IS "
                   "NULL") == "1";
      },
      30s));
  db.call("submit('DOOMED', 'x')");
  BOOST_REQUIRE(test::eventually([&] { return receiver.hits().size() >= 2; }, 30s));
  first->kill_hard();
  auto failed_tries = receiver.hits().size();
  receiver.set_failing(false);
  auto second = std::make_unique<node_process>(binary, "a2", db.conninfo(), options);
  BOOST_REQUIRE_MESSAGE(test::eventually(
                            [&] {
                              return db.scalar(
                                         "SELECT count(*) FROM taskmill.alert_deliveries WHERE "
                                         "delivered_at IS NOT NULL") == "1";
                            },
                            60s),
                        test::later{[&](std::ostream& out) { out << second->log_tail(); }});
  BOOST_CHECK_EQUAL(second->stop(), 0);
  auto hits = receiver.hits();
  BOOST_CHECK_GE(hits.size(), failed_tries + 1);
  BOOST_CHECK_EQUAL(hits.back().status, 200);
  BOOST_CHECK_EQUAL(hits.back().body["kind"], "dead_task");
  BOOST_CHECK_EQUAL(db.scalar("SELECT count(*) FROM taskmill.alerts"), "1");
}

BOOST_AUTO_TEST_SUITE_END()
