// SPEC §8 HTTP API end to end through a real node, and SPEC §9 bad input for
// every endpoint: a 4xx naming the field, and nothing stored changes.
#define BOOST_TEST_MODULE api
#include <boost/test/unit_test.hpp>

#include "messages/errors.hpp"
#include "tests/support/nodes.hpp"
#include "tests/support/raw_http.hpp"
#include "tools/http_fetch.hpp"

#include <nlohmann/json.hpp>

#include <chrono>
#include <deque>
#include <functional>
#include <thread>

using namespace taskmill;
using namespace std::chrono_literals;
using nlohmann::json;

namespace {

struct reply {
  int status = 0;
  json body;
  std::string raw;
  std::string content_type;
};

struct api_fixture : test::nodes_fixture {
  std::string base;
  std::vector<std::pair<std::string, std::string>> headers;

  explicit api_fixture(const std::string& token = "",
                       std::chrono::milliseconds poll_interval = 500ms,
                       const std::function<void(config&)>& adjust = {})
      : nodes_fixture("api") {
    auto cfg = test::test_node_config("api-node");
    cfg.api.token = token;
    cfg.scheduling.poll_interval = poll_interval;
    cfg.api.max_body_bytes = 4 << 20;
    if (adjust) adjust(cfg);
    base = api_url(start(cfg));
  }

  reply call(const std::string& method, const std::string& path, const std::string& body = {},
             std::vector<std::pair<std::string, std::string>> extra = {}) {
    auto all = headers;
    all.insert(all.end(), extra.begin(), extra.end());
    auto res = http_fetch(method, base + path, body, all);
    BOOST_REQUIRE_MESSAGE(res, test::describe(res));
    reply out{res->status, {}, res->body, res->content_type};
    if (res->content_type.rfind("application/json", 0) == 0)
      out.body = json::parse(res->body, nullptr, false);
    return out;
  }

  /// Expects an error answer with `status` whose message contains `part`.
  void expect_error(const reply& r, int status, const std::string& part) {
    BOOST_CHECK_EQUAL(r.status, status);
    BOOST_REQUIRE_MESSAGE(r.body.contains("error"), "no error object in " << r.raw);
    auto message = r.body["error"]["message"].get<std::string>();
    BOOST_CHECK_MESSAGE(message.find(part) != std::string::npos,
                        "message '" << message << "' does not mention '" << part << "'");
    BOOST_CHECK(r.body["error"]["code"].is_string());
  }

  int64_t count_tasks() { return std::stoll(db.scalar("SELECT count(*) FROM taskmill.tasks")); }

  json wait_for_status(int64_t id, const std::string& status) {
    json task;
    BOOST_REQUIRE(test::eventually([&] {
      task = call("GET", "/v1/tasks/" + std::to_string(id)).body;
      return task["status"] == status;
    }));
    return task;
  }
};

struct token_fixture : api_fixture {
  token_fixture() : api_fixture("s3cret") {}
};

/// A node that polls for due work only every 10 s: what it claims sooner,
/// it claims because it was woken.
struct slow_poll_fixture : api_fixture {
  slow_poll_fixture() : api_fixture("", 10s) {}
};

/// SLEEP tasks that may run a minute, once.
void sleep_once(config& cfg) {
  auto& sleep = cfg.types.at("SLEEP");
  sleep.timeout = 60s;
  sleep.max_retries = 0;
}

/// A node polling every 10 s whose SLEEP tasks are keyed in space "pool"
/// (keys given at submit), one running a key, as its config says.
struct keyed_slow_poll_fixture : api_fixture {
  keyed_slow_poll_fixture()
      : api_fixture("", 10s, [](config& cfg) {
          sleep_once(cfg);
          cfg.types.at("SLEEP").key_space = "pool";
          auto& pool = cfg.key_spaces["pool"];
          pool.name = "pool";
          pool.limit = 1;
        }) {}
};

/// The same, but its config keys no type.
struct unkeyed_slow_poll_fixture : api_fixture {
  unkeyed_slow_poll_fixture() : api_fixture("", 10s, sleep_once) {}
};

}  // namespace

BOOST_FIXTURE_TEST_SUITE(tasks, api_fixture)

BOOST_AUTO_TEST_CASE(submit_run_and_read_back) {
  auto created =
      call("POST", "/v1/tasks",
           R"({"type": "NOOP", "key": "42", "version": "3", "payload": {"a": [1, 2]}, "priority": 2,
                          "batch": "b1", "trace_id": "0af7651916cd43dd8448eb211c80319c",
                          "backoff": {"kind": "fixed", "base_ms": 100}})");
  BOOST_REQUIRE_EQUAL(created.status, 200);
  BOOST_CHECK_EQUAL(created.body["outcome"], "created");
  const auto& task = created.body["task"];
  for (const char* field :
       {"id",          "type",       "key",       "version", "status",      "priority",
        "execute_at",  "payload",    "result",    "error",   "attempt",     "retry_count",
        "max_retries", "timeout_ms", "picked_by", "batch",   "shard_index", "shard_total",
        "trace_id",    "created_at", "updated_at"})
    BOOST_CHECK_MESSAGE(task.contains(field), "task lacks " << field);
  BOOST_CHECK_EQUAL(task["version"], 3);
  BOOST_CHECK_EQUAL(task["payload"], json::parse(R"({"a": [1, 2]})"));
  BOOST_CHECK_EQUAL(task["trace_id"], "0af7651916cd43dd8448eb211c80319c");
  auto id = task["id"].get<int64_t>();
  auto done = wait_for_status(id, "succeeded");
  BOOST_CHECK_EQUAL(done["attempt"], 1);
  BOOST_CHECK_EQUAL(done["picked_by"], "api-node");
  auto again = call("POST", "/v1/tasks", R"({"type": "NOOP", "key": "42", "version": 3})");
  BOOST_CHECK_EQUAL(again.body["outcome"], "duplicate");
  auto older = call("POST", "/v1/tasks", R"({"type": "NOOP", "key": "42", "version": 2})");
  BOOST_CHECK_EQUAL(older.body["outcome"], "stale");
  auto attempts = call("GET", "/v1/tasks/" + std::to_string(id) + "/attempts");
  BOOST_REQUIRE_EQUAL(attempts.body["attempts"].size(), 1u);
  BOOST_CHECK_EQUAL(attempts.body["attempts"][0]["outcome"], "succeeded");
  BOOST_CHECK_EQUAL(attempts.body["attempts"][0]["node"], "api-node");
  auto batch = call("GET", "/v1/batches/b1");
  BOOST_CHECK_EQUAL(batch.body["counts"]["succeeded"], 1);
}

// PostgreSQL's lock table is shared by the server's sessions, and a submit
// holds a lock a task until it commits. `hog` opens a transaction holding as
// many locks as the table takes and answers how many.
int fill_the_lock_table(db::connection& hog) {
  BOOST_REQUIRE(hog.exec("BEGIN"));
  int held = 0;
  for (;; held += 1000) {
    BOOST_REQUIRE(hog.exec("SAVEPOINT chunk"));
    if (!hog.exec("SELECT pg_advisory_xact_lock(7777, g) FROM generate_series(" +
                  std::to_string(held) + ", " + std::to_string(held + 999) + ") g")) {
      BOOST_REQUIRE(hog.exec("ROLLBACK TO SAVEPOINT chunk"));
      return held;
    }
    BOOST_REQUIRE(hog.exec("RELEASE SAVEPOINT chunk"));
  }
}

json many_tasks(int count) {
  json batch;
  for (int i = 0; i < count; ++i)
    batch["tasks"].push_back({{"type", "NOOP"}, {"key", std::to_string(i)}});
  return batch;
}

// A submit that finds the table full of other transactions' locks for all
// its tries is answered 503, retryable, and stores nothing; once they end,
// the same submit goes through.
BOOST_AUTO_TEST_CASE(a_submit_that_finds_the_lock_table_full_is_answered_retryable) {
  auto batch = many_tasks(2000);
  auto hog = db.connect_direct();
  BOOST_TEST_MESSAGE("the lock table was full with " << fill_the_lock_table(hog) << " locks held");
  auto refused = call("POST", "/v1/tasks", batch.dump());
  BOOST_REQUIRE(hog.exec("COMMIT"));
  expect_error(refused, 503, "shared memory");
  BOOST_CHECK_EQUAL(refused.body["error"]["code"], "retryable");
  BOOST_CHECK_EQUAL(count_tasks(), 0);
  auto taken = call("POST", "/v1/tasks", batch.dump());
  BOOST_REQUIRE_EQUAL(taken.status, 200);
  BOOST_CHECK_EQUAL(taken.body["results"].size(), 2000u);
  BOOST_CHECK_EQUAL(count_tasks(), 2000);
}

// Its tries are spread over about a second: one that finds the table full
// for a moment, as another node's batches fill it, is stored.
BOOST_AUTO_TEST_CASE(a_submit_that_finds_the_lock_table_full_for_a_moment_is_stored) {
  auto batch = many_tasks(2000);
  auto hog = db.connect_direct();
  fill_the_lock_table(hog);
  bool released = false;
  std::jthread release{[&] {
    std::this_thread::sleep_for(std::chrono::milliseconds{150});
    released = static_cast<bool>(hog.exec("COMMIT"));
  }};
  auto taken = call("POST", "/v1/tasks", batch.dump());
  release.join();
  BOOST_REQUIRE(released);
  BOOST_REQUIRE_EQUAL(taken.status, 200);
  BOOST_CHECK_EQUAL(taken.body["results"].size(), 2000u);
  BOOST_CHECK_EQUAL(count_tasks(), 2000);
}

// SPEC §4: a batch's records sum over its tasks, whatever their status.
BOOST_AUTO_TEST_CASE(a_batchs_records_sum_over_its_tasks_of_every_status) {
  auto done = call("POST", "/v1/tasks", R"({"type": "NOOP", "key": "r1", "batch": "rb"})");
  auto later =
      call("POST", "/v1/tasks",
           R"({"type": "NOOP", "key": "r2", "batch": "rb", "execute_at": "2099-01-01T00:00:00Z"})");
  BOOST_REQUIRE(done.status == 200 && later.status == 200);
  wait_for_status(done.body["task"]["id"].get<int64_t>(), "succeeded");
  // As their attempts reported them: the finished one's and the earlier
  // attempt's of the one due again.
  db.exec(
      "INSERT INTO taskmill.task_progress (task_id, attempt, processed, failed, reported_at) "
      "VALUES ($1, 1, 100, 6, now()), ($2, 0, 50, 1, now())",
      {done.body["task"]["id"].dump(), later.body["task"]["id"].dump()});
  auto batch = call("GET", "/v1/batches/rb");
  BOOST_REQUIRE_EQUAL(batch.status, 200);
  BOOST_CHECK_EQUAL(batch.body["counts"], json::parse(R"({"pending": 1, "succeeded": 1})"));
  BOOST_CHECK_EQUAL(batch.body["records"], json::parse(R"({"processed": 150, "failed": 7})"));
}

BOOST_AUTO_TEST_CASE(batch_submits_answer_in_order) {
  auto res =
      call("POST", "/v1/tasks",
           R"({"tasks": [{"type": "NOOP", "key": "a"}, {"type": "NOOP", "key": "b", "version": 1},
                                {"type": "NOOP", "key": "a"}]})");
  BOOST_REQUIRE_EQUAL(res.status, 200);
  const auto& results = res.body["results"];
  BOOST_REQUIRE_EQUAL(results.size(), 3u);
  BOOST_CHECK_EQUAL(results[0]["task"]["key"], "a");
  BOOST_CHECK_EQUAL(results[1]["task"]["key"], "b");
  BOOST_CHECK_EQUAL(results[0]["outcome"], "created");
  BOOST_CHECK(results[2]["outcome"] == "replaced" || results[2]["outcome"] == "duplicate");
}

BOOST_AUTO_TEST_CASE(reschedule_cancel_and_retry) {
  auto later =
      call("POST", "/v1/tasks",
           R"({"type": "SLEEP", "key": "k", "payload": 50, "execute_at": "2099-01-01T00:00:00Z"})");
  auto id = later.body["task"]["id"].get<int64_t>();
  auto moved = call("POST", "/v1/tasks/reschedule",
                    R"({"type": "SLEEP", "key": "k", "execute_at": "2098-06-01T12:00:00+02:00"})");
  BOOST_CHECK_EQUAL(moved.status, 200);
  BOOST_CHECK_EQUAL(moved.body["outcome"], "updated");
  BOOST_CHECK_EQUAL(moved.body["task"]["execute_at"], "2098-06-01T10:00:00Z");
  auto cancelled = call("POST", "/v1/tasks/cancel", "{\"id\": \"" + std::to_string(id) + "\"}");
  BOOST_CHECK_EQUAL(cancelled.body["outcome"], "cancelled");
  auto unchanged = call("POST", "/v1/tasks/cancel", R"({"type": "SLEEP", "key": "k"})");
  BOOST_CHECK_EQUAL(unchanged.body["outcome"], "unchanged");
  auto rerun = call("POST", "/v1/tasks/" + std::to_string(id) + "/retry");
  BOOST_CHECK_EQUAL(rerun.status, 200);
  wait_for_status(id, "succeeded");

  auto fails = call("POST", "/v1/tasks", R"({"type": "FAIL", "key": "f", "batch": "bf"})");
  auto fid = fails.body["task"]["id"].get<int64_t>();
  wait_for_status(fid, "dead");
  auto retried = call("POST", "/v1/batches/bf/retry-failed");
  BOOST_CHECK_EQUAL(retried.status, 200);
  BOOST_CHECK_EQUAL(retried.body["retried"], 1);
  BOOST_CHECK(test::eventually(
      [&] { return call("GET", "/v1/tasks/" + std::to_string(fid)).body["attempt"] == 2; }));
}

BOOST_AUTO_TEST_CASE(listing_pages_through_filters) {
  for (int i = 0; i < 5; ++i)
    call("POST", "/v1/tasks",
         "{\"type\": \"NOOP\", \"key\": \"p" + std::to_string(i) + "\", \"batch\": \"pb\"}");
  call("POST", "/v1/tasks",
       R"({"type": "SLEEP", "key": "other", "execute_at": "2099-01-01T00:00:00Z"})");
  // Newest first.
  std::string keys;
  std::string path = "/v1/tasks?batch=pb&limit=2";
  for (int page = 0; page < 5; ++page) {
    auto res = call("GET", path);
    BOOST_REQUIRE_EQUAL(res.status, 200);
    for (const auto& t : res.body["tasks"]) keys += t["key"].get<std::string>() + ",";
    if (res.body["next_page_token"].is_null()) break;
    path =
        "/v1/tasks?batch=pb&limit=2&page_token=" + res.body["next_page_token"].get<std::string>();
  }
  BOOST_CHECK_EQUAL(keys, "p4,p3,p2,p1,p0,");
  auto pending = call("GET", "/v1/tasks?type=SLEEP&status=pending");
  BOOST_REQUIRE_EQUAL(pending.body["tasks"].size(), 1u);
  BOOST_CHECK_EQUAL(pending.body["tasks"][0]["key"], "other");
  auto by_key = call("GET", "/v1/tasks?type=SLEEP&key=other");
  BOOST_CHECK_EQUAL(by_key.body["tasks"].size(), 1u);
}

BOOST_AUTO_TEST_CASE(stats_nodes_health_and_metrics) {
  call("POST", "/v1/tasks", R"({"type": "NOOP", "key": "s"})");
  BOOST_REQUIRE(test::eventually([&] {
    auto stats = call("GET", "/v1/stats");
    return stats.body["counts"]["NOOP"]["succeeded"] == 1;
  }));
  auto stats = call("GET", "/v1/stats");
  BOOST_CHECK(stats.body["limiter"].is_array());
  BOOST_CHECK_EQUAL(stats.body["limiter"][0]["scope"], "node:api-node");
  BOOST_CHECK_EQUAL(call("GET", "/healthz").status, 200);
  auto ready = call("GET", "/readyz");
  BOOST_CHECK_EQUAL(ready.status, 200);
  BOOST_CHECK_EQUAL(ready.body["ready"], true);
  auto metrics = call("GET", "/metrics");
  BOOST_CHECK_EQUAL(metrics.status, 200);
  BOOST_CHECK(metrics.raw.find("taskmill_claimed_total 1") != std::string::npos);
  BOOST_CHECK(metrics.raw.find("taskmill_outcomes_total{outcome=\"succeeded\"} 1") !=
              std::string::npos);
  BOOST_CHECK_EQUAL(call("GET", "/v1/nodes").status, 200);
}

BOOST_AUTO_TEST_CASE(metrics_per_type_and_recent_throughput) {
  call("POST", "/v1/tasks", R"({"type": "NOOP", "key": "m1"})");
  call("POST", "/v1/tasks", R"({"type": "FAIL", "key": "m2"})");
  call("POST", "/v1/tasks",
       R"({"type": "SLEEP", "key": "later", "execute_at": "2099-01-01T00:00:00Z"})");
  // The node adds its outcomes to the minute at its next heartbeat.
  json recent;
  BOOST_REQUIRE(test::eventually([&] {
    recent = call("GET", "/v1/stats").body["recent"];
    int64_t succeeded = 0, failed = 0;
    for (const auto& m : recent) {
      succeeded += m["succeeded"].get<int64_t>();
      failed += m["failed"].get<int64_t>();
    }
    return succeeded == 1 && failed == 1;
  }));
  BOOST_CHECK_EQUAL(recent.size(), 15u);
  BOOST_CHECK(recent.back()["minute"].is_string());
  auto metrics = call("GET", "/metrics").raw;
  for (const char* line :
       {"taskmill_task_outcomes_total{outcome=\"succeeded\",type=\"NOOP\"} 1",
        "taskmill_task_outcomes_total{outcome=\"fail\",type=\"FAIL\"} 1",
        "taskmill_pickup_seconds_count{type=\"NOOP\"} 1",
        "taskmill_execution_seconds_count{type=\"FAIL\"} 1",
        "taskmill_tasks{status=\"pending\",type=\"SLEEP\"} 1",
        "taskmill_limit{scope=\"node:api-node\"} 2048", "taskmill_limit_used{scope=\"global\"} 0"})
    BOOST_CHECK_MESSAGE(metrics.find(line) != std::string::npos, "no line " << line);
}

// A task is in flight on its node from its claim until its outcome is
// stored, and /metrics says so.
BOOST_AUTO_TEST_CASE(metrics_count_the_tasks_in_flight) {
  auto in_flight = [&] {
    auto metrics = call("GET", "/metrics").raw;
    const std::string name = "\ntaskmill_in_flight ";
    auto at = metrics.find(name);
    BOOST_REQUIRE_MESSAGE(at != std::string::npos, metrics);
    return std::stoi(metrics.substr(at + name.size()));
  };
  BOOST_CHECK_EQUAL(in_flight(), 0);
  for (const char* key : {"flying1", "flying2"})
    call("POST", "/v1/tasks",
         std::string{R"({"type": "SLEEP", "payload": {"ms": 1500}, "key": ")"} + key + "\"}");
  BOOST_CHECK(test::eventually([&] { return in_flight() == 2; }, 5s));
  BOOST_CHECK(test::eventually([&] { return in_flight() == 0; }, 10s));
  BOOST_CHECK_EQUAL(
      db.scalar(
          "SELECT count(*) FROM taskmill.tasks WHERE type = 'SLEEP' AND status = 'succeeded'"),
      "2");
}

// The console's overview asks for the stats every few seconds: with more
// than 100,000 rows, finished tasks are estimated from a sample, held for
// the calls that follow, and live ones stay exact while there are up to
// 100,000 of them.
BOOST_AUTO_TEST_CASE(stats_of_a_large_table_estimate_only_finished_tasks) {
  db.exec(
      "INSERT INTO taskmill.tasks (type, key, status, priority, execute_at, trace_id, max_retries, "
      "timeout_ms, backoff_kind, backoff_base_ms, backoff_cap_ms, backoff_jitter) SELECT 'BULK', "
      "'b' || g, 'succeeded', 3, now(), 't', 3, 5000, 'fixed', 1000, 1000, 0 FROM "
      "generate_series(1, 150000) g");
  db.exec("ANALYZE taskmill.tasks");
  call("POST", "/v1/tasks",
       R"({"type": "SLEEP", "key": "exact", "execute_at": "2099-01-01T00:00:00Z"})");
  auto stats = call("GET", "/v1/stats").body;
  BOOST_CHECK_EQUAL(stats["estimated"], json::array({"succeeded"}));
  BOOST_CHECK_EQUAL(stats["counts"]["SLEEP"]["pending"], 1);
  auto bulk = stats["counts"]["BULK"]["succeeded"].get<int64_t>();
  BOOST_TEST_MESSAGE("150,000 succeeded tasks estimated at " << bulk);
  BOOST_CHECK(bulk > 50000 && bulk < 300000);
  // The estimate is held for 10 s (storage/finished_estimate.hpp): the
  // tasks gone are not sampled yet, while live tasks are counted at every
  // call. The table's statistics still count them.
  auto sampled_at = std::chrono::steady_clock::now();
  db.exec("DELETE FROM taskmill.tasks WHERE type = 'BULK'");
  call("POST", "/v1/tasks",
       R"({"type": "SLEEP", "key": "exact2", "execute_at": "2099-01-01T00:00:00Z"})");
  stats = call("GET", "/v1/stats").body;
  auto since_sample = std::chrono::steady_clock::now() - sampled_at;
  BOOST_TEST_MESSAGE("asked again after "
                     << std::chrono::duration_cast<std::chrono::milliseconds>(since_sample).count()
                     << " ms");
  if (since_sample < 9s) {
    BOOST_CHECK_EQUAL(stats["counts"]["BULK"]["succeeded"], bulk);
    BOOST_CHECK_EQUAL(stats["estimated"], json::array({"succeeded"}));
  } else {
    BOOST_TEST_MESSAGE("too slow a machine to see the estimate held: not checked");
  }
  BOOST_CHECK_EQUAL(stats["counts"]["SLEEP"]["pending"], 2);
  // Once the table is small again, finished tasks are counted at once.
  db.exec("VACUUM ANALYZE taskmill.tasks");
  stats = call("GET", "/v1/stats").body;
  BOOST_CHECK(!stats["counts"].contains("BULK"));
  BOOST_CHECK_EQUAL(stats["estimated"], json::array());
}

// A calendar of millions of tasks due days later must not make each scrape
// and console poll count them all: beyond 100,000 they are estimated.
BOOST_AUTO_TEST_CASE(a_large_calendar_is_estimated_in_the_stats_and_metrics) {
  db.exec(
      "INSERT INTO taskmill.tasks (type, key, status, priority, execute_at, trace_id, max_retries, "
      "timeout_ms, backoff_kind, backoff_base_ms, backoff_cap_ms, backoff_jitter) SELECT 'CAL', "
      "'c' || g, 'pending', 3, now() + interval '3 days', 't', 3, 5000, 'fixed', 1000, 1000, 0 "
      "FROM generate_series(1, 150000) g");
  auto stats = call("GET", "/v1/stats").body;
  BOOST_CHECK_EQUAL(stats["estimated"], json::array({"pending"}));
  auto cal = stats["counts"]["CAL"]["pending"].get<int64_t>();
  BOOST_TEST_MESSAGE("150,000 pending tasks estimated at " << cal);
  BOOST_CHECK(cal > 50000 && cal < 300000);
  auto metrics = call("GET", "/metrics").raw;
  BOOST_CHECK_MESSAGE(
      metrics.find("taskmill_tasks{status=\"pending\",type=\"CAL\"}") != std::string::npos,
      metrics);
}

// A page of one type reads that type's tasks: a type rare among a million
// tasks is listed whole in one page. Other filters read at most 50,000 tasks
// before the page's token, so that one matching few of a million tasks answers
// as fast as any other; following the tokens finds every match.
BOOST_AUTO_TEST_CASE(a_rare_type_is_listed_in_one_page_and_a_rare_key_in_bounded_pages) {
  db.exec(
      "INSERT INTO taskmill.tasks (type, key, status, priority, execute_at, trace_id, max_retries, "
      "timeout_ms, backoff_kind, backoff_base_ms, backoff_cap_ms, backoff_jitter) SELECT CASE WHEN "
      "g % 60000 = 2 THEN 'RARE' ELSE 'BULK' END, 'b' || g, 'succeeded', 3, now(), 't', 3, 5000, "
      "'fixed', 1000, 1000, 0 FROM generate_series(1, 130000) g");
  struct listing {
    std::string filter;
    size_t matches;
    int pages;
  };
  for (const auto& [filter, matches, pages_expected] :
       {listing{"type=RARE", 3, 1}, listing{"type=NO_SUCH_TYPE", 0, 1}, listing{"key=b60002", 1, 3},
        listing{"key=no-such-key", 0, 3}}) {
    BOOST_TEST_CONTEXT(filter) {
      std::vector<int64_t> found;
      int pages = 0;
      std::string token;
      do {
        auto page = call("GET", "/v1/tasks?" + filter + "&limit=10" +
                                    (token.empty() ? "" : "&page_token=" + token))
                        .body;
        ++pages;
        for (const auto& t : page["tasks"]) found.push_back(t["id"].get<int64_t>());
        token = page["next_page_token"].is_string() ? page["next_page_token"].get<std::string>()
                                                    : std::string{};
      } while (!token.empty() && pages < 10);
      BOOST_CHECK_EQUAL(found.size(), matches);
      BOOST_CHECK(std::is_sorted(found.rbegin(), found.rend()));
      BOOST_CHECK_EQUAL(pages, pages_expected);
    }
  }
}

BOOST_AUTO_TEST_CASE(a_task_says_why_it_is_not_running) {
  auto later = call("POST", "/v1/tasks",
                    R"({"type": "NOOP", "key": "w", "execute_at": "2099-01-01T00:00:00Z"})");
  auto id = later.body["task"]["id"].get<int64_t>();
  auto task = call("GET", "/v1/tasks/" + std::to_string(id)).body;
  BOOST_CHECK_EQUAL(task["waiting"]["reason"], "due_later");
  BOOST_CHECK_EQUAL(task["waiting"]["until"], "2099-01-01T00:00:00Z");
  auto unrun = call("POST", "/v1/tasks", R"({"type": "NOBODY_RUNS_THIS", "key": "w"})");
  auto unrun_id = unrun.body["task"]["id"].get<int64_t>();
  task = call("GET", "/v1/tasks/" + std::to_string(unrun_id)).body;
  BOOST_CHECK_EQUAL(task["waiting"]["reason"], "no_node_for_type");
  auto done = call("POST", "/v1/tasks", R"({"type": "NOOP", "key": "w2"})");
  task = wait_for_status(done.body["task"]["id"].get<int64_t>(), "succeeded");
  BOOST_CHECK(!task.contains("waiting"));
}

// SPEC §4 Keyed limits: a key given at submit, and a task's keys read back.
BOOST_AUTO_TEST_CASE(a_concurrency_key_is_given_at_submit_and_read_back) {
  db.exec(
      "SELECT taskmill.put_type_settings('{GIVEN}', '{5000}', '{2}', '{fixed}', '{1}', '{1000}', "
      "'{0}', '{NULL}', '{NULL}', NULL, NULL, NULL, '[{\"name\": \"accounts\", \"limit\": "
      "2}]', '{accounts}', '{NULL}', '{NULL}')");
  auto created =
      call("POST", "/v1/tasks", R"({"type": "GIVEN", "key": "g1", "concurrency_key": "acme"})");
  BOOST_REQUIRE_EQUAL(created.status, 200);
  auto id = created.body["task"]["id"].get<int64_t>();
  auto task = call("GET", "/v1/tasks/" + std::to_string(id)).body;
  BOOST_CHECK_EQUAL(task["key_space"], "accounts");
  BOOST_CHECK_EQUAL(task["concurrency_key"], "acme");
  BOOST_CHECK(task["key_class"].is_null());
  auto plain = call("POST", "/v1/tasks", R"({"type": "NOOP", "key": "p1"})");
  BOOST_CHECK(plain.body["task"]["concurrency_key"].is_null());
  expect_error(
      call("POST", "/v1/tasks", R"({"type": "NOOP", "key": "p2", "concurrency_key": "acme"})"), 400,
      "concurrency_key: type NOOP has no key space");
  expect_error(call("POST", "/v1/tasks", R"({"type": "GIVEN", "key": "g2", "concurrency_key": 7})"),
               400, "concurrency_key");
  BOOST_CHECK_EQUAL(count_tasks(), 2);
}

// SPEC §4 Keyed limits: /metrics shows the keys running most in each space,
// and the rest of them together, however many run.
BOOST_AUTO_TEST_CASE(metrics_show_the_keys_running_most_and_the_rest_together) {
  db.exec(
      "SELECT taskmill.put_type_settings('{HELD}', '{5000}', '{2}', '{fixed}', '{1}', '{1000}', "
      "'{0}', '{NULL}', '{NULL}', NULL, NULL, NULL, '[{\"name\": \"accounts\", \"limit\": "
      "5}]', '{accounts}', '{NULL}', '{NULL}')");
  // k0 runs 3, k1..k11 one each: k0 and the first nine others by name are
  // shown, k8 and k9 are the rest.
  db.exec(
      "SELECT count(taskmill.submit('HELD', 'h' || g || '-' || k, concurrency_key => 'k' || "
      "k)) FROM generate_series(0, 11) k, generate_series(1, 3) g WHERE k = 0 OR g = 1");
  db.exec(
      "UPDATE taskmill.tasks SET status = 'running', attempt = 1, started_at = now(), "
      "heartbeat_at = now(), picked_by = 'elsewhere' WHERE type = 'HELD'");
  auto metrics = call("GET", "/metrics").raw;
  for (const char* line : {"taskmill_key_running{key=\"k0\",space=\"accounts\"} 3",
                           "taskmill_key_limit{key=\"k0\",space=\"accounts\"} 5",
                           "taskmill_key_running{key=\"k11\",space=\"accounts\"} 1",
                           "taskmill_key_running{key=\"(other)\",space=\"accounts\"} 2"})
    BOOST_CHECK_MESSAGE(metrics.find(line) != std::string::npos, "no " << line);
  BOOST_CHECK(metrics.find("key=\"k9\"") == std::string::npos);
}

// SPEC §4 Keyed limits: key spaces are read and changed through the API,
// bad values refused naming the field with nothing changed.
BOOST_AUTO_TEST_CASE(key_spaces_are_read_and_changed_through_the_api) {
  db.exec(
      "SELECT taskmill.put_type_settings('{HELD}', '{5000}', '{2}', '{fixed}', '{1}', '{1000}', "
      "'{0}', '{NULL}', '{NULL}', NULL, NULL, NULL, '[{\"name\": \"accounts\", \"limit\": 2, "
      "\"keys\": {\"acme\": 3}}]', '{accounts}', '{NULL}', '{NULL}', '{2}')");
  // acme: 1 running, 3 due, 1 later; beta: 2 running, 1 due; "": 1 due.
  db.exec(
      "SELECT count(taskmill.submit('HELD', k || g, concurrency_key => k, execute_at => "
      "CASE WHEN g = 5 THEN now() + interval '1 day' ELSE now() END)) "
      "FROM (VALUES ('acme', 5), ('beta', 3), ('', 1)) v(k, n), generate_series(1, v.n) g");
  db.exec(
      "UPDATE taskmill.tasks SET status = 'running', attempt = 1, started_at = now(), "
      "heartbeat_at = now(), picked_by = 'elsewhere' WHERE key IN ('acme1', 'beta1', 'beta2')");

  auto list = call("GET", "/v1/key-spaces");
  BOOST_REQUIRE_EQUAL(list.status, 200);
  BOOST_REQUIRE_EQUAL(list.body["key_spaces"].size(), 1u);
  const auto& space = list.body["key_spaces"][0];
  BOOST_CHECK_EQUAL(space["name"], "accounts");
  BOOST_CHECK_EQUAL(space["limit"], 2);
  BOOST_CHECK_EQUAL(space["keys"]["acme"], 3);
  BOOST_CHECK(space["rate"].is_null());
  BOOST_CHECK_EQUAL(space["types"], json::array({"HELD"}));
  BOOST_CHECK_EQUAL(space["running"], 3);
  BOOST_CHECK_EQUAL(space["keys_running"], 2);
  BOOST_CHECK(!space.contains("top_running"));

  auto one = call("GET", "/v1/key-spaces/accounts?top=1").body;
  BOOST_REQUIRE_EQUAL(one["top_running"].size(), 1u);
  BOOST_CHECK_EQUAL(one["top_running"][0]["key"], "beta");
  BOOST_CHECK_EQUAL(one["top_running"][0]["running"], 2);
  BOOST_CHECK_EQUAL(one["top_running"][0]["limit"], 2);
  BOOST_CHECK_EQUAL(one["top_running"][0]["limit_from"], "space");
  BOOST_REQUIRE_EQUAL(one["top_due"].size(), 1u);
  BOOST_CHECK_EQUAL(one["top_due"][0]["key"], "acme");
  BOOST_CHECK_EQUAL(one["top_due"][0]["due"], 3);
  BOOST_CHECK_EQUAL(one["top_due"][0]["limit"], 3);
  BOOST_CHECK_EQUAL(one["top_due"][0]["limit_from"], "key");
  BOOST_CHECK_EQUAL(one["due_capped"], false);
  BOOST_CHECK_EQUAL(call("GET", "/v1/key-spaces/accounts").body["top_due"].size(), 3u);

  auto acme = call("GET", "/v1/key-spaces/accounts/keys/acme?tasks=3").body;
  BOOST_CHECK_EQUAL(acme["space"], "accounts");
  BOOST_CHECK_EQUAL(acme["key"], "acme");
  BOOST_CHECK_EQUAL(acme["running"], 1);
  BOOST_CHECK_EQUAL(acme["due"], 3);
  BOOST_CHECK_EQUAL(acme["later"], 1);
  BOOST_CHECK(acme["rate_used"].is_null());
  // Its running task, then its waiting ones in claim order, 3 of each at most.
  BOOST_REQUIRE_EQUAL(acme["tasks"].size(), 4u);
  BOOST_CHECK_EQUAL(acme["tasks"][0]["key"], "acme1");
  BOOST_CHECK_EQUAL(acme["tasks"][0]["status"], "running");
  BOOST_CHECK_EQUAL(acme["tasks"][1]["key"], "acme2");
  auto shared = call("GET", "/v1/key-spaces/accounts/keys/").body;
  BOOST_CHECK_EQUAL(shared["key"], "");
  BOOST_CHECK_EQUAL(shared["due"], 1);

  // Refused, naming the field; nothing changes.
  auto before = call("GET", "/v1/key-spaces/accounts").raw;
  for (const auto& [body, part] : std::vector<std::pair<std::string, std::string>>{
           {R"({"limit": 0})", "key_spaces.accounts.limit must be a whole number"},
           {R"({"limit": 2, "rate": 10})",
            "key_spaces.accounts: rate and period (period_ms) go together"},
           {R"({"limit": 2, "rate": 10, "period_ms": 0})", "key_spaces.accounts.period"},
           {R"({"limit": 2, "keys": {"acme": "x"}})", "keys.acme must be an integer"},
           {R"({"limit": 2, "classes": {"pro": 5}})", "key_spaces.accounts.classes needs"},
           {R"({"limit": 2, "class_path": "$$.["})", "key_spaces.accounts.class_path"},
           {R"({"limit": 2, "bogus": 1})", "unknown field bogus"},
           {R"({"keys": {}})", "limit is required"},
           {R"({"name": "other", "limit": 2})", "differs from the name in the path"},
           {R"({"limit": 3, "keys": {"acme": null}})", "keys.acme must be an integer"},
           {R"({"limit": 3, "rate": 1, "period_ms": 1000})",
            "key_spaces.accounts.rate must be at least the rate_units of type HELD keyed in it "
            "(2)"}})
    expect_error(call("PUT", "/v1/key-spaces/accounts", body), 400, part);
  expect_error(call("PUT", "/v1/key-spaces/accounts?force=1", R"({"limit": 3})"), 400,
               "unknown query parameter");
  BOOST_CHECK_EQUAL(call("GET", "/v1/key-spaces/accounts").raw, before);

  auto changed = call("PUT", "/v1/key-spaces/accounts",
                      R"({"limit": 4, "keys": {"acme": 1}, "rate": 10, "period_ms": 60000})");
  BOOST_CHECK_EQUAL(changed.status, 200);
  BOOST_CHECK_EQUAL(changed.body["created"], false);
  BOOST_CHECK_EQUAL(changed.body["key_space"]["limit"], 4);
  BOOST_CHECK_EQUAL(changed.body["key_space"]["rate"], 10);
  BOOST_CHECK_EQUAL(changed.body["key_space"]["period_ms"], 60000);
  acme = call("GET", "/v1/key-spaces/accounts/keys/acme").body;
  BOOST_CHECK_EQUAL(acme["limit"], 1);
  BOOST_CHECK_EQUAL(acme["rate_used"], 0);
  BOOST_CHECK_EQUAL(db.scalar("SELECT key_limit FROM taskmill.key_spaces WHERE name = 'accounts'"),
                    "4");

  BOOST_CHECK_EQUAL(call("PUT", "/v1/key-spaces/spare", R"({"limit": 1})").status, 201);
  expect_error(call("DELETE", "/v1/key-spaces/accounts"), 409,
               "key space accounts is the key "
               "space of types HELD");
  BOOST_CHECK_EQUAL(call("DELETE", "/v1/key-spaces/spare").status, 200);
  expect_error(call("DELETE", "/v1/key-spaces/spare"), 404, "no key space spare");
  expect_error(call("GET", "/v1/key-spaces/spare"), 404, "no key space spare");
  expect_error(call("GET", "/v1/key-spaces/spare/keys/acme"), 404, "no key space spare");
  expect_error(call("GET", "/v1/key-spaces/accounts?top=0"), 400, "top must be an integer");
  expect_error(call("GET", "/v1/key-spaces/accounts/keys/acme?limit=3"), 400,
               "unknown query parameter");
}

BOOST_AUTO_TEST_CASE(the_console_and_the_openapi_document_are_served) {
  auto page = call("GET", "/ui/");
  BOOST_CHECK_EQUAL(page.status, 200);
  BOOST_CHECK(page.content_type.rfind("text/html", 0) == 0);
  BOOST_CHECK(page.raw.find("console.js") != std::string::npos);
  BOOST_CHECK_EQUAL(call("GET", "/ui/console.js").status, 200);
  auto bare = call("GET", "/ui");
  BOOST_CHECK_EQUAL(bare.status, 308);
  expect_error(call("GET", "/ui/nothing.js"), 404, "no such file");
  expect_error(call("POST", "/ui/"), 405, "not allowed");
  auto doc = call("GET", "/v1/openapi.json");
  BOOST_CHECK_EQUAL(doc.status, 200);
  BOOST_CHECK(doc.body.contains("openapi"));
}

BOOST_AUTO_TEST_CASE(protobuf_bodies_work_like_json) {
  pb::SubmitTasks req;
  auto t = req.add_tasks();
  t->set_type("NOOP");
  t->set_key("pb-1");
  t->set_payload(R"({"via": "protobuf"})");
  auto res = call("POST", "/v1/tasks", req.SerializeAsString(),
                  {{"Content-Type", "application/x-protobuf"}});
  BOOST_REQUIRE_EQUAL(res.status, 200);
  BOOST_CHECK_EQUAL(res.content_type, "application/x-protobuf");
  pb::SubmitResults results;
  BOOST_REQUIRE(results.ParseFromString(res.raw));
  BOOST_REQUIRE_EQUAL(results.results_size(), 1);
  BOOST_CHECK_EQUAL(results.results(0).outcome(), pb::CREATED);
  auto id = results.results(0).task().id();
  auto got =
      call("GET", "/v1/tasks/" + std::to_string(id), {}, {{"Accept", "application/x-protobuf"}});
  pb::Task task;
  BOOST_REQUIRE(task.ParseFromString(got.raw));
  BOOST_CHECK_EQUAL(task.key(), "pb-1");
  auto bad =
      call("POST", "/v1/tasks", "\xff\xff\xff", {{"Content-Type", "application/x-protobuf"}});
  BOOST_CHECK_EQUAL(bad.status, 400);
  pb::Error err;
  BOOST_REQUIRE(err.ParseFromString(bad.raw));
  BOOST_CHECK_EQUAL(err.code(), "invalid_argument");
}

// SPEC §4 Keyed limits: a key's limit raised through the API holds at once
// on a running node, and one lowered holds for the next starts.
BOOST_FIXTURE_TEST_CASE(a_key_limit_changed_through_the_api_holds_on_running_nodes,
                        keyed_slow_poll_fixture) {
  std::string tasks;
  for (int i = 0; i < 6; ++i)
    tasks += std::string{i > 0 ? "," : ""} + R"({"type": "SLEEP", "key": "s)" + std::to_string(i) +
             R"(", "payload": {"ms": 30000}, "concurrency_key": "acme"})";
  BOOST_REQUIRE_EQUAL(call("POST", "/v1/tasks", R"({"tasks": [)" + tasks + "]}").status, 200);
  auto running = [&] {
    return std::stoll(
        db.scalar("SELECT count(*) FROM taskmill.tasks WHERE type = 'SLEEP' AND status = "
                  "'running'"));
  };
  BOOST_REQUIRE(test::eventually([&] { return running() == 1; }));
  std::this_thread::sleep_for(1200ms);
  BOOST_CHECK_EQUAL(running(), 1);
  auto raised_at = std::chrono::steady_clock::now();
  BOOST_REQUIRE_EQUAL(call("PUT", "/v1/key-spaces/pool", R"({"limit": 3})").status, 200);
  BOOST_REQUIRE(test::eventually([&] { return running() == 3; }, 12s));
  auto took = std::chrono::steady_clock::now() - raised_at;
  BOOST_TEST_MESSAGE("the raised limit held after "
                     << std::chrono::duration_cast<std::chrono::milliseconds>(took).count()
                     << " ms");
  // Woken by the change, not by its next poll.
  BOOST_CHECK_LT(took, 5s);
  BOOST_REQUIRE_EQUAL(call("PUT", "/v1/key-spaces/pool", R"({"limit": 1})").status, 200);
  auto cancel_running = [&] {
    db.exec(
        "SELECT count(taskmill.cancel('SLEEP', key)) FROM taskmill.tasks WHERE type = 'SLEEP' AND "
        "status = 'running'");
  };
  cancel_running();
  BOOST_REQUIRE(test::eventually([&] { return running() == 1; }));
  std::this_thread::sleep_for(1200ms);
  BOOST_CHECK_EQUAL(running(), 1);
  db.exec("SELECT count(taskmill.cancel('SLEEP', key)) FROM taskmill.tasks WHERE type = 'SLEEP'");
}

// SPEC §4 Keyed limits: a type another node's config keys is keyed on a
// node whose config does not say so; a task of a key at its limit starts as
// soon as the key's running task ends, not at the node's next poll.
BOOST_FIXTURE_TEST_CASE(a_type_keyed_by_another_nodes_config_starts_its_keys_next_task_at_once,
                        unkeyed_slow_poll_fixture) {
  db.exec(R"(SELECT taskmill.put_key_spaces('[{"name": "pool", "limit": 1}]'))");
  db.exec("UPDATE taskmill.task_types SET key_space = 'pool' WHERE type = 'SLEEP'");
  std::string tasks;
  for (int i = 0; i < 4; ++i)
    tasks += std::string{i > 0 ? "," : ""} + R"({"type": "SLEEP", "key": "k)" + std::to_string(i) +
             R"(", "payload": {"ms": 1500}, "concurrency_key": "acme"})";
  BOOST_REQUIRE_EQUAL(call("POST", "/v1/tasks", R"({"tasks": [)" + tasks + "]}").status, 200);
  BOOST_REQUIRE(test::eventually(
      [&] {
        return db.scalar(
                   "SELECT count(*) FROM taskmill.tasks WHERE type = 'SLEEP' AND status = "
                   "'succeeded'") == "4";
      },
      40s));
  // Each started after the one before ended, and within a second of it
  // (the tasks were due a second or more before: no next-due wake-up).
  auto gaps = db.exec(
      "SELECT extract(epoch FROM started_at - lag(finished_at) OVER (ORDER BY started_at)) "
      "FROM taskmill.tasks WHERE type = 'SLEEP' ORDER BY started_at OFFSET 1");
  BOOST_REQUIRE_EQUAL(gaps.rows(), 3);
  for (int i = 0; i < gaps.rows(); ++i) {
    BOOST_TEST_MESSAGE("gap " << i << ": " << gaps.text(i, 0) << " s");
    BOOST_CHECK_GE(gaps.float64(i, 0), 0.0);
    BOOST_CHECK_LT(gaps.float64(i, 0), 1.0);
  }
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_FIXTURE_TEST_SUITE(bad_input, api_fixture)

BOOST_AUTO_TEST_CASE(bad_submissions_name_the_field_and_store_nothing) {
  call(
      "POST", "/v1/tasks",
      R"({"type": "SLEEP", "key": "keep", "payload": {"v": 1}, "execute_at": "2099-01-01T00:00:00Z"})");
  auto before = count_tasks();
  expect_error(call("POST", "/v1/tasks", R"({"type": "NOOP", "key": )"), 400, "not valid JSON");
  expect_error(call("POST", "/v1/tasks", R"(["not", "an", "object"])"), 400, "object");
  expect_error(call("POST", "/v1/tasks", R"({"type": 5, "key": "k"})"), 400,
               "type must be a string");
  expect_error(call("POST", "/v1/tasks", R"({"type": "NOOP"})"), 400, "key is required");
  expect_error(call("POST", "/v1/tasks", R"({"type": "NOOP", "key": "k", "prio": 1})"), 400,
               "unknown field prio");
  expect_error(call("POST", "/v1/tasks", R"({"type": "NOOP", "key": "k", "priority": 9})"), 400,
               "priority");
  expect_error(call("POST", "/v1/tasks", R"({"type": "NOOP", "key": "k", "priority": "high"})"),
               400, "priority must be an integer");
  expect_error(call("POST", "/v1/tasks", R"({"type": "NOOP", "key": "k", "version": -1})"), 400,
               "version");
  expect_error(
      call("POST", "/v1/tasks", R"({"type": "NOOP", "key": "k", "execute_at": "tomorrow"})"), 400,
      "execute_at must be an RFC 3339 time");
  expect_error(call("POST", "/v1/tasks",
                    R"({"type": "NOOP", "key": "k", "execute_at": "2026-02-30T00:00:00Z"})"),
               400, "execute_at");
  expect_error(call("POST", "/v1/tasks", R"({"type": "NOOP", "key": "k", "timeout_ms": 0})"), 400,
               "timeout_ms");
  expect_error(
      call("POST", "/v1/tasks", R"({"type": "NOOP", "key": "k", "backoff": {"kind": "linear"}})"),
      400, "backoff.kind");
  expect_error(call("POST", "/v1/tasks", R"({"type": "NOOP", "key": "k", "trace_id": "xyz"})"), 400,
               "trace_id");
  expect_error(call("POST", "/v1/tasks", R"({"type": "NOOP", "key": "k", "shard_index": 1})"), 400,
               "shard");
  expect_error(call("POST", "/v1/tasks", R"({"tasks": "all of them"})"), 400,
               "tasks must be an array");
  expect_error(call("POST", "/v1/tasks", R"({"tasks": []})"), 400, "tasks must not be empty");
  expect_error(
      call(
          "POST", "/v1/tasks",
          R"({"tasks": [{"type": "NOOP", "key": "ok"}, {"type": "NOOP", "key": "x", "priority": 0}]})"),
      400, "tasks[1].priority");
  std::string huge =
      R"({"type": "NOOP", "key": "big", "payload": ")" + std::string(1100000, 'x') + "\"}";
  expect_error(call("POST", "/v1/tasks", huge), 413, "payload");
  std::string too_big_body =
      R"({"type": "NOOP", "key": "bigger", "payload": ")" + std::string(5 << 20, 'x') + "\"}";
  BOOST_CHECK_EQUAL(call("POST", "/v1/tasks", too_big_body).status, 413);
  BOOST_CHECK_EQUAL(count_tasks(), before);
  BOOST_CHECK_EQUAL(db.scalar("SELECT payload::text FROM taskmill.tasks WHERE key = 'keep'"),
                    R"({"v": 1})");
}

BOOST_AUTO_TEST_CASE(bad_reschedules_and_cancels) {
  call("POST", "/v1/tasks",
       R"({"type": "SLEEP", "key": "keep", "execute_at": "2099-01-01T00:00:00Z"})");
  auto before = db.scalar("SELECT execute_at::text || status FROM taskmill.tasks");
  expect_error(call("POST", "/v1/tasks/reschedule", R"({"type": "SLEEP", "key": "keep"})"), 400,
               "execute_at is required");
  expect_error(
      call("POST", "/v1/tasks/reschedule", R"({"type": "SLEEP", "key": "keep", "execute_at": 17})"),
      400, "execute_at must be a string");
  expect_error(call("POST", "/v1/tasks/reschedule",
                    R"({"type": "SLEEP", "key": "keep", "execute_at": "next tuesday"})"),
               400, "execute_at");
  expect_error(call("POST", "/v1/tasks/reschedule",
                    R"({"type": "SLEEP", "key": "keep", "execute_at": "2099-02-30T00:00:00Z"})"),
               400, "execute_at");
  expect_error(call("POST", "/v1/tasks/reschedule",
                    R"({"type": "SLEEP", "execute_at": "2099-01-01T00:00:00Z"})"),
               400, "key is required");
  expect_error(
      call("POST", "/v1/tasks/reschedule", R"({"type": "SLEEP", "key": "keep", "when": "now"})"),
      400, "unknown field when");
  expect_error(call("POST", "/v1/tasks/reschedule", R"({"type": "SLEEP", "key": )"), 400, "JSON");
  expect_error(call("POST", "/v1/tasks/reschedule",
                    R"({"type": "SLEEP", "key": "keep", "execute_at": "2099-01-01T00:00:00Z", )"
                    R"("payload": ")" +
                        std::string(1100000, 'x') + "\"}"),
               413, "payload");
  expect_error(call("POST", "/v1/tasks/reschedule",
                    R"({"type": "SLEEP", "key": "keep", "execute_at": "2099-01-01T00:00:00Z", )"
                    R"("payload": {"a": })"),
               400, "JSON");
  expect_error(call("POST", "/v1/tasks/cancel", R"({"id": 1,)"), 400, "JSON");
  expect_error(call("POST", "/v1/tasks/cancel", R"({"type": 7, "key": "keep"})"), 400, "type");
  expect_error(call("POST", "/v1/tasks/cancel", R"({})"), 400, "id or type and key");
  expect_error(call("POST", "/v1/tasks/cancel", R"({"id": "abc"})"), 400, "id must be an integer");
  expect_error(call("POST", "/v1/tasks/cancel", R"({"id": 1, "type": "SLEEP", "key": "keep"})"),
               400, "not both");
  expect_error(call("POST", "/v1/tasks/cancel", R"({"id": 999999})"), 404,
               "no task with id 999999");
  expect_error(call("POST", "/v1/tasks/cancel", R"({"type": "SLEEP", "key": "nope"})"), 404,
               "no task");
  BOOST_CHECK_EQUAL(db.scalar("SELECT execute_at::text || status FROM taskmill.tasks"), before);
}

BOOST_AUTO_TEST_CASE(bad_ids_queries_and_results) {
  auto t = call("POST", "/v1/tasks", R"({"type": "SLEEP", "key": "long", "payload": 5000})");
  auto id = std::to_string(t.body["task"]["id"].get<int64_t>());
  BOOST_REQUIRE(
      test::eventually([&] { return call("GET", "/v1/tasks/" + id).body["status"] == "running"; }));
  expect_error(call("GET", "/v1/tasks/abc"), 400, "positive integer");
  expect_error(call("GET", "/v1/tasks/0"), 400, "positive integer");
  expect_error(call("GET", "/v1/tasks/424242"), 404, "no task with id 424242");
  expect_error(call("GET", "/v1/tasks/424242/attempts"), 404, "no task");
  expect_error(call("GET", "/v1/tasks?status=sleeping"), 400, "status must be one of");
  expect_error(call("GET", "/v1/tasks?limit=0"), 400, "limit");
  expect_error(call("GET", "/v1/tasks?limit=5000"), 400, "limit");
  expect_error(call("GET", "/v1/tasks?colour=red"), 400, "unknown query parameter \"colour\"");
  expect_error(call("GET", "/v1/tasks?page_token=zz"), 400, "page_token");
  expect_error(call("POST", "/v1/tasks/" + id + "/result", R"({"outcome": "succeeded"})"), 400,
               "attempt is required");
  expect_error(call("POST", "/v1/tasks/" + id + "/result", R"({"attempt": 1, "outcome": "great"})"),
               400, "outcome");
  expect_error(call("POST", "/v1/tasks/" + id + "/result", R"({"attempt": 1})"), 400,
               "outcome is required");
  auto stale =
      call("POST", "/v1/tasks/" + id + "/result", R"({"attempt": 7, "outcome": "succeeded"})");
  BOOST_CHECK_EQUAL(stale.status, 200);
  BOOST_CHECK_EQUAL(stale.body["accepted"], false);
  expect_error(call("POST", "/v1/tasks/424242/result", R"({"attempt": 1, "outcome": "succeeded"})"),
               404, "no task with id 424242");
  expect_error(call("POST", "/v1/tasks/" + id + "/result", R"({"attempt": 1, "outcome": )"), 400,
               "JSON");
  expect_error(
      call("POST", "/v1/tasks/" + id + "/result", R"({"attempt": "one", "outcome": "fail"})"), 400,
      "attempt");
  expect_error(call("POST", "/v1/tasks/" + id + "/result",
                    R"({"attempt": 1, "outcome": "succeeded", "result": ")" +
                        std::string(1100000, 'x') + "\"}"),
               413, "result");
  for (const auto* path : {"/v1/tasks/reschedule", "/v1/tasks/cancel"})
    BOOST_CHECK_EQUAL(
        call("POST", path, "\xff\xff\xff", {{"Content-Type", "application/x-protobuf"}}).status,
        400);
  BOOST_CHECK_EQUAL(call("POST", "/v1/tasks/" + id + "/result", "\xff\xff\xff",
                         {{"Content-Type", "application/x-protobuf"}})
                        .status,
                    400);
  expect_error(call("POST", "/v1/tasks/" + id + "/retry"), 409, "running");
  expect_error(call("POST", "/v1/tasks/424242/retry"), 404, "no task");
  expect_error(call("GET", "/v1/batches/none"), 404, "no batch none");
  expect_error(call("GET", "/v1/nothing-here"), 404, "no such endpoint");
  expect_error(call("DELETE", "/v1/tasks/" + id), 405, "not allowed");
  BOOST_CHECK_EQUAL(db.scalar("SELECT status FROM taskmill.tasks WHERE id = " + id), "running");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_FIXTURE_TEST_SUITE(one_rule_book, api_fixture)

BOOST_AUTO_TEST_CASE(the_api_and_a_business_transaction_refuse_the_same_in_the_same_words) {
  auto conn = db.connect();
  std::vector<std::pair<std::string, std::string>> cases = {
      {R"("priority": 9)", "priority => 9"},
      {R"("priority": 0)", "priority => 0"},
      {R"("version": -1)", "version => -1"},
      {R"("max_retries": 1001)", "max_retries => 1001"},
      {R"("max_retries": -1)", "max_retries => -1"},
      {R"("timeout_ms": 604800001)", "timeout_ms => 604800001"},
      {R"("timeout_ms": 0)", "timeout_ms => 0"},
      {R"("backoff": {"kind": "fixed", "base_ms": -5})",
       "backoff_kind => 'fixed', backoff_base_ms => -5"},
      {R"("backoff": {"cap_ms": -1})", "backoff_cap_ms => -1"},
      {R"("backoff": {"jitter": 2})", "backoff_jitter => 2"},
      {R"("batch": "")", "batch => ''"},
      {R"("batch": ")" + std::string(201, 'b') + "\"", "batch => repeat('b', 201)"},
      {R"("trace_id": "XYZ")", "trace_id => 'XYZ'"},
      {R"("trace_id": "00000000000000000000000000000000")",
       "trace_id => '00000000000000000000000000000000'"},
      {R"("shard_index": 1)", "shard_index => 1"},
      {R"("shard_index": 3, "shard_total": 2)", "shard_index => 3, shard_total => 2"},
      {R"("shard_index": 0, "shard_total": 10001)", "shard_index => 0, shard_total => 10001"},
  };
  auto before = count_tasks();
  for (const auto& [json_fields, sql_args] : cases) {
    BOOST_TEST_CONTEXT(json_fields) {
      auto api = call("POST", "/v1/tasks", R"({"type": "NOOP", "key": "k", )" + json_fields + "}");
      BOOST_CHECK_EQUAL(api.status, 400);
      auto sql = conn.exec("SELECT * FROM taskmill.submit('NOOP', 'k', " + sql_args + ")");
      BOOST_REQUIRE(!sql);
      BOOST_CHECK_EQUAL(api.body["error"]["message"].get<std::string>(),
                        error_message(sql.error()));
    }
  }
  for (const auto& [json_body, sql_args] : std::vector<std::pair<std::string, std::string>>{
           {R"({"type": "", "key": "k"})", "'', 'k'"},
           {R"({"type": "NOOP", "key": ""})", "'NOOP', ''"},
           {R"({"type": "NOOP"})", "'NOOP', NULL"},
           {R"({"type": ")" + std::string(201, 't') + R"(", "key": "k"})", "repeat('t', 201), 'k'"},
           {R"({"type": "NOOP", "key": ")" + std::string(501, 'k') + "\"}",
            "'NOOP', repeat('k', 501)"}}) {
    BOOST_TEST_CONTEXT(json_body.substr(0, 60)) {
      auto api = call("POST", "/v1/tasks", json_body);
      BOOST_CHECK_EQUAL(api.status, 400);
      auto sql = conn.exec("SELECT * FROM taskmill.submit(" + sql_args + ")");
      BOOST_REQUIRE(!sql);
      BOOST_CHECK_EQUAL(api.body["error"]["message"].get<std::string>(),
                        error_message(sql.error()));
    }
  }
  // In a batch, the API names the task by its place; so does the node's
  // batch statement.
  expect_error(call("POST", "/v1/tasks",
                    R"({"tasks": [{"type": "NOOP", "key": "a"}, {"type": "NOOP", "key": "b",
                        "shard_total": 3}]})"),
               400, "tasks[1].shard_index and shard_total go together");
  auto resched = call("POST", "/v1/tasks/reschedule", R"({"type": "NOOP", "key": ""})");
  auto resched_sql = conn.exec("SELECT * FROM taskmill.reschedule('NOOP', '', NULL)");
  BOOST_REQUIRE(!resched_sql);
  BOOST_CHECK_EQUAL(resched.body["error"]["message"].get<std::string>(),
                    error_message(resched_sql.error()));
  BOOST_CHECK_EQUAL(count_tasks(), before);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_FIXTURE_TEST_SUITE(hostile_input, api_fixture)

std::string nested(int levels, const std::string& inner = "1") {
  std::string out;
  for (int i = 0; i < levels; ++i) out += "{\"a\":";
  out += inner;
  out += std::string(static_cast<size_t>(levels), '}');
  return out;
}

/// The answer is JSON even when the input was not UTF-8, and the API still
/// answers afterwards.
void expect_clean(api_fixture& f, const reply& r) {
  BOOST_CHECK_MESSAGE(!r.body.is_discarded() && r.body.is_object(),
                      "the answer is not valid JSON: " << r.raw.substr(0, 200));
  BOOST_CHECK_EQUAL(f.call("GET", "/healthz").status, 200);
}

BOOST_AUTO_TEST_CASE(invalid_utf8_anywhere_is_refused_naming_where) {
  auto before = count_tasks();
  auto check = [&](const reply& r, const std::string& part) {
    expect_error(r, 400, part);
    expect_clean(*this, r);
  };
  check(call("GET", "/v1/tasks/%ff"), "path must be valid UTF-8");
  check(call("GET", "/v1/tasks/%ff/attempts"), "path");
  check(call("GET", "/v1/%c3%28"), "path");
  check(call("GET", "/v1/tasks?type=%ff%fe"), "query parameter type must be valid UTF-8");
  check(call("GET", "/v1/tasks?ty%ffpe=x"), "query parameter name");
  check(call("GET", "/v1/stats", {}, {{"X-Note", "caf\xe9"}}), "header \"x-note\"");
  check(call("POST", "/v1/tasks", "{\"type\": \"NOOP\", \"key\": \"k\xff\"}"),
        "key is not valid UTF-8");
  check(call("POST", "/v1/tasks",
             "{\"type\": \"NOOP\", \"key\": \"k\", \"payload\": {\"\xed\xa0\x80\": 1}}"),
        "payload");
  check(call("POST", "/v1/tasks/cancel", "{\"type\": \"NOOP\xc0\xaf\", \"key\": \"k\"}"),
        "type is not valid UTF-8");
  pb::SubmitTasks tasks;
  auto t = tasks.add_tasks();
  t->set_type("NOOP");
  t->set_key("k\xff");
  check(call("POST", "/v1/tasks", tasks.SerializeAsString(),
             {{"Content-Type", "application/x-protobuf"}, {"Accept", "application/json"}}),
        "key must be valid UTF-8");
  BOOST_CHECK_EQUAL(count_tasks(), before);
  BOOST_CHECK_EQUAL(call("GET", "/readyz").status, 200);
}

BOOST_AUTO_TEST_CASE(numbers_out_of_range_name_the_field) {
  auto huge = "1" + std::string(400, '0');
  for (const char* field : {"priority", "version", "max_retries", "timeout_ms"})
    for (const std::string& number : {std::string{"1e400"}, std::string{"-1e400"}, huge}) {
      auto r =
          call("POST", "/v1/tasks",
               std::string{R"({"type": "NOOP", "key": "k", ")"} + field + "\": " + number + "}");
      expect_error(r, 400, field);
      expect_clean(*this, r);
    }
  expect_error(call("POST", "/v1/tasks",
                    R"({"tasks": [{"type": "NOOP", "key": "a"}, {"type": "NOOP", "key": "b",
                        "backoff": {"kind": "fixed", "jitter": 1e999}}]})"),
               400, "tasks[1].backoff.jitter");
  expect_error(
      call("POST", "/v1/tasks", R"({"type": "NOOP", "key": "k", "payload": [1, 2, -1e999]})"), 400,
      "payload[2] is a number out of range");
  expect_error(call("POST", "/v1/tasks/cancel", R"({"id": 1e400})"), 400, "id");
  expect_error(call("POST", "/v1/tasks/cancel", R"({"id": 99999999999999999999})"), 400, "id");
  expect_error(call("POST", "/v1/tasks/1/result", R"({"attempt": 1e400, "outcome": "fail"})"), 400,
               "attempt");
  expect_error(call("GET", "/v1/tasks?limit=" + huge), 400, "limit");
  expect_error(call("GET", "/v1/tasks/" + huge), 400, "positive integer");
  BOOST_CHECK_EQUAL(count_tasks(), 0);
}

BOOST_AUTO_TEST_CASE(deep_nesting_is_refused_far_below_what_the_stack_takes) {
  for (int levels : {65, 1000, 100000}) {
    auto r = call("POST", "/v1/tasks",
                  R"({"type": "NOOP", "key": "deep", "payload": )" + nested(levels) + "}");
    expect_error(r, 400, "payload.a.a");
    expect_error(r, 400, "nested deeper than 64 levels");
    expect_clean(*this, r);
    std::string arrays = std::string(static_cast<size_t>(levels), '[') +
                         std::string(static_cast<size_t>(levels), ']');
    expect_error(
        call("POST", "/v1/tasks", R"({"type": "NOOP", "key": "deep", "payload": )" + arrays + "}"),
        400, "payload[0][0]");
  }
  pb::SubmitTasks tasks;
  auto t = tasks.add_tasks();
  t->set_type("NOOP");
  t->set_key("deep");
  t->set_payload(nested(100000));
  expect_error(call("POST", "/v1/tasks", tasks.SerializeAsString(),
                    {{"Content-Type", "application/x-protobuf"}, {"Accept", "application/json"}}),
               400, "payload.a.a");
  BOOST_CHECK_EQUAL(count_tasks(), 0);
  auto ok = call(
      "POST", "/v1/tasks",
      R"({"type": "SLEEP", "key": "deepest", "execute_at": "2099-01-01T00:00:00Z", "payload": )" +
          nested(64) + "}");
  BOOST_CHECK_EQUAL(ok.status, 200);
  auto id = std::to_string(ok.body["task"]["id"].get<int64_t>());
  expect_error(call("POST", "/v1/tasks/" + id + "/result",
                    R"({"attempt": 1, "outcome": "succeeded", "result": )" + nested(70000) + "}"),
               400, "result.a.a");
}

BOOST_AUTO_TEST_CASE(nul_characters_name_the_field) {
  auto check = [&](const std::string& body, const std::string& part,
                   const std::string& path = "/v1/tasks") {
    auto r = call("POST", path, body);
    expect_error(r, 400, part);
    expect_clean(*this, r);
  };
  check(R"({"type": "NO\u0000OP", "key": "k"})", "type must not contain the NUL character");
  check(R"({"type": "NOOP", "key": "k\u0000"})", "key must not contain the NUL character");
  check(R"({"type": "NOOP", "key": "k", "batch": "b\u0000"})", "batch must not contain");
  check(R"({"type": "NOOP", "key": "k", "payload": {"x": "\u0000"}})",
        "payload.x must not contain");
  check(R"({"type": "NOOP", "key": "k", "payload": {"\u0000": 1}})", "payload has a key with");
  check(
      R"({"tasks": [{"type": "NOOP", "key": "k"}, {"type": "NOOP", "key": "k2", "payload": ["\u0000"]}]})",
      "tasks[1].payload[0] must not contain");
  check(R"({"type": "NOOP", "key": "k\u0000", "execute_at": "2099-01-01T00:00:00Z"})",
        "key must not", "/v1/tasks/reschedule");
  check(R"({"attempt": 1, "outcome": "fail", "error": "bad\u0000"})", "error must not contain",
        "/v1/tasks/1/result");
  check(R"({"attempt": 1, "outcome": "succeeded", "result": "\u0000"})", "result must not contain",
        "/v1/tasks/1/result");
  BOOST_CHECK_EQUAL(count_tasks(), 0);
}

BOOST_AUTO_TEST_CASE(wrong_methods_are_405_with_allow) {
  auto raw = test::raw_exchange(
      nodes.front().api_port(),
      "DELETE /v1/tasks/1 HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
  BOOST_CHECK_EQUAL(test::first_status(raw), 405);
  BOOST_CHECK_MESSAGE(raw.find("\r\nAllow: GET, HEAD\r\n") != std::string::npos, raw);
  for (const auto& [method, path, allow] :
       std::vector<std::tuple<std::string, std::string, std::string>>{
           {"PUT", "/v1/tasks", "GET, HEAD, POST"},
           {"GET", "/v1/tasks/cancel", "POST"},
           {"GET", "/v1/tasks/1/retry", "POST"},
           {"POST", "/v1/stats", "GET, HEAD"},
           {"PATCH", "/healthz", "GET, HEAD"},
           {"DELETE", "/v1/batches/b/retry-failed", "POST"}}) {
    auto r = call(method, path);
    expect_error(r, 405, "allowed: " + allow);
  }
  expect_error(call("DELETE", "/v1/nowhere"), 404, "no such endpoint");
}

BOOST_AUTO_TEST_CASE(head_answers_carry_no_body_and_keep_the_connection_usable) {
  auto raw =
      test::raw_exchange(nodes.front().api_port(),
                         "HEAD /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
                         "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
  auto second = raw.find("HTTP/1.1 200", 1);
  BOOST_REQUIRE_MESSAGE(raw.rfind("HTTP/1.1 200", 0) == 0 && second != std::string::npos, raw);
  auto head = raw.substr(0, second);
  BOOST_CHECK_MESSAGE(head.size() >= 4 && head.substr(head.size() - 4) == "\r\n\r\n",
                      "the HEAD answer has a body: " << head);
  BOOST_CHECK_MESSAGE(head.find("Content-Length: 15") != std::string::npos, head);
  BOOST_CHECK_MESSAGE(raw.substr(second).find(R"({"status":"ok"})") != std::string::npos, raw);
}

BOOST_AUTO_TEST_CASE(oversized_urls_and_headers_are_414_and_431) {
  auto port = nodes.front().api_port();
  auto long_target = "/v1/tasks?type=" + std::string(9000, 'a');
  BOOST_CHECK_EQUAL(test::first_status(test::raw_exchange(
                        port, "GET " + long_target + " HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")),
                    414);
  BOOST_CHECK_EQUAL(
      test::first_status(test::raw_exchange(port, "GET /v1/tasks?type=" + std::string(40000, 'a') +
                                                      " HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")),
      414);
  BOOST_CHECK_EQUAL(test::first_status(test::raw_exchange(
                        port, "GET /v1/stats HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: " +
                                  std::string(20000, 'b') + "\r\n\r\n")),
                    431);
  std::string many;
  for (int i = 0; i < 2000; ++i) many += "X-H" + std::to_string(i) + ": v\r\n";
  BOOST_CHECK_EQUAL(test::first_status(test::raw_exchange(
                        port, "GET /v1/stats HTTP/1.1\r\nHost: 127.0.0.1\r\n" + many + "\r\n")),
                    431);
  BOOST_CHECK_EQUAL(test::first_status(test::raw_exchange(port, "NOT HTTP AT ALL\r\n\r\n")), 400);
  BOOST_CHECK_EQUAL(
      test::first_status(test::raw_exchange(port, "GET /healthz HTTP/1.1\r\nBad Header\r\n\r\n")),
      400);
  BOOST_CHECK_EQUAL(call("GET", "/healthz").status, 200);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_FIXTURE_TEST_SUITE(auth, token_fixture)

BOOST_AUTO_TEST_CASE(a_configured_token_is_required_except_for_probes) {
  expect_error(call("GET", "/v1/stats"), 401, "Bearer");
  expect_error(call("POST", "/v1/tasks", R"({"type": "NOOP", "key": "x"})",
                    {{"Authorization", "Bearer wrong"}}),
               401, "Bearer");
  BOOST_CHECK_EQUAL(count_tasks(), 0);
  BOOST_CHECK_EQUAL(call("GET", "/healthz").status, 200);
  BOOST_CHECK_EQUAL(call("GET", "/readyz").status, 200);
  BOOST_CHECK_EQUAL(call("GET", "/metrics").status, 200);
  BOOST_CHECK_EQUAL(call("GET", "/ui/").status, 200);
  // Without the token nothing says which paths exist, or which methods.
  for (const auto& [method, path] :
       std::vector<std::pair<std::string, std::string>>{{"GET", "/v1/nothing-here"},
                                                        {"GET", "/nothing-here"},
                                                        {"GET", "/"},
                                                        {"PATCH", "/v1/stats"},
                                                        {"GET", "/v1/tasks/1/nothing"}})
    BOOST_CHECK_MESSAGE(call(method, path).status == 401, method << " " << path);
  for (const char* scheme : {"bearer s3cret", "BEARER s3cret", "Bearer   s3cret"})
    BOOST_CHECK_MESSAGE(call("GET", "/v1/stats", {}, {{"Authorization", scheme}}).status == 200,
                        scheme);
  for (const char* wrong : {"Bearers3cret", "Basic s3cret", "Bearer s3cret2", "Bearer"})
    BOOST_CHECK_MESSAGE(call("GET", "/v1/stats", {}, {{"Authorization", wrong}}).status == 401,
                        wrong);
  headers = {{"Authorization", "Bearer s3cret"}};
  BOOST_CHECK_EQUAL(call("POST", "/v1/tasks", R"({"type": "NOOP", "key": "x"})").status, 200);
  BOOST_CHECK_EQUAL(call("GET", "/v1/stats").status, 200);
  expect_error(call("GET", "/v1/nothing-here"), 404, "no such endpoint");
  auto wrong_method = call("PATCH", "/v1/stats");
  BOOST_CHECK_EQUAL(wrong_method.status, 405);
}

BOOST_AUTO_TEST_SUITE_END()

// What a web page in the operator's browser could send (SPEC §8): simple
// cross-origin requests, forms, and DNS rebinding. None changes or reads
// anything; the node's own clients go on.
BOOST_FIXTURE_TEST_SUITE(browsers, api_fixture)

BOOST_AUTO_TEST_CASE(a_simple_or_form_request_changes_nothing) {
  auto task = std::string{R"({"type": "NOOP", "key": "csrf"})"};
  for (const char* type :
       {"text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=b", ""})
    expect_error(call("POST", "/v1/tasks", task, {{"Content-Type", type}}), 415,
                 "Content-Type header must be application/json");
  BOOST_CHECK_EQUAL(count_tasks(), 0);
  // Body-less changes need the type too: a form could send them otherwise.
  BOOST_REQUIRE_EQUAL(
      call("PUT", "/v1/jobs/nightly", R"({"schedule": "0 3 * * *", "type": "NOOP"})").status, 201);
  for (const char* change : {"/v1/jobs/nightly/trigger", "/v1/jobs/nightly/pause"})
    expect_error(call("POST", change, "", {{"Content-Type", "text/plain"}}), 415, "Content-Type");
  expect_error(call("DELETE", "/v1/jobs/nightly", "", {{"Content-Type", ""}}), 415, "Content-Type");
  BOOST_CHECK_EQUAL(db.scalar("SELECT count(*) FROM taskmill.job_firings"), "0");
  BOOST_CHECK_EQUAL(db.scalar("SELECT enabled FROM taskmill.jobs WHERE name = 'nightly'"), "t");
  // The node's own clients send the type, with or without a body.
  BOOST_CHECK_EQUAL(call("POST", "/v1/jobs/nightly/pause").status, 200);
  BOOST_CHECK_EQUAL(
      call("POST", "/v1/tasks", task, {{"Content-Type", "application/json; charset=utf-8"}}).status,
      200);
}

BOOST_AUTO_TEST_CASE(a_page_of_another_origin_is_refused) {
  for (const char* origin : {"http://attacker.example", "http://127.0.0.1:1", "null"})
    expect_error(call("POST", "/v1/tasks", R"({"type": "NOOP", "key": "o"})", {{"Origin", origin}}),
                 403, "Origin header");
  expect_error(call("GET", "/v1/stats", "", {{"Origin", "http://attacker.example"}}), 403,
               "api.allowed_origins");
  BOOST_CHECK_EQUAL(count_tasks(), 0);
  // The console's own page.
  auto own = base.substr(0, base.find('/', 7));
  BOOST_CHECK_EQUAL(
      call("POST", "/v1/tasks", R"({"type": "NOOP", "key": "o"})", {{"Origin", own}}).status, 200);
}

BOOST_AUTO_TEST_CASE(a_host_that_is_not_the_node_is_refused_everywhere) {
  for (const char* path :
       {"/v1/stats", "/v1/tasks", "/healthz", "/readyz", "/metrics", "/ui/", "/v1/openapi.json"})
    expect_error(call("GET", path, "", {{"Host", "rebound.attacker.example:8480"}}), 421,
                 "api.allowed_hosts");
  expect_error(call("POST", "/v1/tasks", R"({"type": "NOOP", "key": "h"})",
                    {{"Host", "rebound.attacker.example"}}),
               421, "Host header");
  BOOST_CHECK_EQUAL(count_tasks(), 0);
  BOOST_CHECK_EQUAL(call("GET", "/healthz", "", {{"Host", "localhost"}}).status, 200);
}

BOOST_AUTO_TEST_CASE(every_answer_carries_the_protective_headers) {
  for (const char* path : {"/ui/", "/ui/console.js", "/v1/stats", "/v1/nowhere"}) {
    auto raw = test::raw_exchange(
        nodes.front().api_port(),
        std::string{"GET "} + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
    for (const char* header :
         {"Content-Security-Policy: default-src 'none'; script-src 'self'; style-src 'self';",
          "frame-ancestors 'none'", "X-Content-Type-Options: nosniff",
          "Referrer-Policy: no-referrer"})
      BOOST_CHECK_MESSAGE(raw.find(header) != std::string::npos, path << " lacks " << header);
  }
}

BOOST_AUTO_TEST_SUITE_END()
