// SPEC §10, workflows: named steps and edges submitted in one request, run
// in graph order through a node, each step given its parents' results;
// cancelled and retried whole; refused whole when anything is wrong; and
// the rules behind them against the SQL functions, with cancels racing
// outcomes on several connections.
#include <boost/test/unit_test.hpp>

#include "tests/support/nodes.hpp"
#include "tests/support/scripted_executor.hpp"
#include "tests/support/task_sql.hpp"
#include "tools/http_fetch.hpp"

#include <nlohmann/json.hpp>

#include <future>
#include <latch>
#include <thread>

using namespace taskmill;
using nlohmann::json;
using namespace std::chrono_literals;
using test::task_database;

namespace {

/// A node that runs NOOP, SLEEP and FAIL tasks, and STEP tasks on a scripted
/// HTTP executor (its answer chosen by the payload), with its API.
struct workflow_fixture : test::nodes_fixture {
  workflow_fixture() : nodes_fixture("workflow_runs") {
    auto cfg = test::test_node_config("workflow-node");
    task_type_config step;
    step.name = "STEP";
    step.executor = executor_kind::http;
    step.url = executor.url();
    step.max_retries = 0;
    cfg.types["STEP"] = step;
    auto& node = start(cfg);
    base = api_url(node);
    executor.set_node_api(base);
  }
  // The nodes go before the executor they call.
  ~workflow_fixture() { stop_nodes(); }

  json call(const std::string& method, const std::string& path, const std::string& body = {}) {
    auto res = http_fetch(method, base + path, body, {});
    BOOST_REQUIRE_MESSAGE(res, test::describe(res));
    last_status = res->status;
    return json::parse(res->body, nullptr, false);
  }

  /// Submits a workflow that must be created; answers it.
  json submit(const std::string& body) {
    auto wf = call("POST", "/v1/workflows", body);
    BOOST_REQUIRE_MESSAGE(last_status == 201, wf.dump());
    return wf;
  }

  json workflow(int64_t id) { return call("GET", "/v1/workflows/" + std::to_string(id)); }

  /// The one task of step `name`.
  static json step_task(const json& wf, const std::string& name) {
    for (const auto& step : wf["steps"])
      if (step["name"] == name) return step["tasks"][0];
    BOOST_FAIL("no step " + name);
    return {};
  }

  std::string counts() {
    return db.scalar(
        "SELECT (SELECT count(*) FROM taskmill.workflows) || '/' || count(*) || '/' || "
        "(SELECT count(*) FROM taskmill.task_edges) FROM taskmill.tasks");
  }

  test::scripted_executor executor;
  std::string base;
  int last_status = 0;
};

/// A workflow submitted in SQL: steps a, b (after a), c (after b), of type
/// `type`; answers its id.
std::string submit_chain(const task_database& db, const std::string& type) {
  return db.scalar(
      "SELECT workflow_id FROM taskmill.submit_workflow('chain', NULL, '{a,b,c}', NULL, 10000, "
      "ARRAY['" +
      type + "', '" + type + "', '" + type +
      "'], NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, "
      "NULL, ARRAY[NULL, '[\"a\"]', '[\"b\"]']::jsonb[], NULL)");
}

std::string step_id(const task_database& db, const std::string& workflow, const std::string& step) {
  return db.scalar(
      "SELECT task_id FROM taskmill.workflow_steps WHERE workflow_id = $1 AND step = $2",
      {workflow, step});
}

}  // namespace

BOOST_FIXTURE_TEST_SUITE(workflow_api, workflow_fixture)

// Fan-out to three shards and a side step, fan-in to one: each step starts
// after every task of its parents finished, and is given their results by
// step (a sharded step's in an array by shard).
BOOST_AUTO_TEST_CASE(steps_run_in_graph_order_each_given_its_parents_results) {
  auto wf = submit(R"({"name": "etl", "steps": [
    {"name": "extract", "type": "STEP", "payload": {"body": "{\"rows\": 3}"}},
    {"name": "shard", "type": "STEP", "routing": "broadcast", "shards": 3, "after": ["extract"],
     "payload": {"body": "{\"part\": true}"}},
    {"name": "audit", "type": "NOOP", "after": ["extract"]},
    {"name": "load", "type": "STEP", "key": "load-2026", "after": ["shard", "audit"],
     "payload": {"body": "\"loaded\""}}]})");
  BOOST_CHECK_EQUAL(wf["outcome"], "created");
  BOOST_CHECK_EQUAL(wf["name"], "etl");
  auto id = wf["id"].get<int64_t>();
  BOOST_REQUIRE_EQUAL(wf["steps"].size(), 4u);
  BOOST_CHECK_EQUAL(wf["steps"][1]["tasks"].size(), 3u);
  BOOST_CHECK_EQUAL(wf["steps"][1]["tasks"][2]["key"], std::to_string(id) + "/shard#2");
  BOOST_CHECK_EQUAL(step_task(wf, "load")["key"], "load-2026");
  BOOST_CHECK_EQUAL(wf["edges"], json::parse(R"([
    {"parent": "extract", "child": "shard", "on_failure": "fail"},
    {"parent": "extract", "child": "audit", "on_failure": "fail"},
    {"parent": "shard", "child": "load", "on_failure": "fail"},
    {"parent": "audit", "child": "load", "on_failure": "fail"}])"));

  BOOST_REQUIRE(test::eventually([&] { return workflow(id)["status"] == "succeeded"; }, 30s));
  wf = workflow(id);
  BOOST_CHECK(wf["finished_at"].is_string());
  for (const auto& step : wf["steps"]) BOOST_CHECK_EQUAL(step["status"], "succeeded");
  auto extract = executor.requests_for(std::to_string(id) + "/extract");
  BOOST_REQUIRE_EQUAL(extract.size(), 1u);
  BOOST_CHECK(!extract[0].body.contains("parents"));
  auto shard = executor.requests_for(std::to_string(id) + "/shard#1");
  BOOST_REQUIRE_EQUAL(shard.size(), 1u);
  BOOST_CHECK_EQUAL(shard[0].body["parents"], json::parse(R"({"extract": {"rows": 3}})"));
  BOOST_CHECK_EQUAL(shard[0].body["shard_index"], 1);
  auto load = executor.requests_for("load-2026");
  BOOST_REQUIRE_EQUAL(load.size(), 1u);
  BOOST_CHECK_EQUAL(load[0].body["parents"],
                    json::parse(R"({"shard": [{"part": true}, {"part": true}, {"part": true}],
                                    "audit": null})"));
  BOOST_CHECK_EQUAL(db.scalar("SELECT bool_and(c.started_at >= p.finished_at) FROM "
                              "taskmill.task_edges e JOIN taskmill.tasks c ON c.id = e.child_id "
                              "JOIN taskmill.tasks p ON p.id = e.parent_id"),
                    "t");
}

BOOST_AUTO_TEST_CASE(a_workflow_is_refused_whole_naming_the_field) {
  auto before = counts();
  auto refused = [&](const std::string& body) {
    auto answer = call("POST", "/v1/workflows", body);
    BOOST_CHECK_EQUAL(last_status, 400);
    return answer["error"]["message"].get<std::string>();
  };
  BOOST_CHECK_EQUAL(refused(R"({"name": "w", "steps": [
    {"name": "a", "type": "NOOP", "after": ["c"]}, {"name": "b", "type": "NOOP", "after": ["a"]},
    {"name": "c", "type": "NOOP", "after": ["b"]}]})"),
                    "steps[1].after: a cycle: a -> b -> c -> a");
  BOOST_CHECK_EQUAL(refused(R"({"name": "w", "steps": [{"name": "a", "type": "NOOP"},
    {"name": "b", "type": "NOOP", "after": ["a", {"step": "x", "on_failure": "run"}]}]})"),
                    "steps[1].after[1].step: no step \"x\"");
  BOOST_CHECK_EQUAL(refused(R"({"name": "w", "steps": [{"name": "a", "type": "NOOP"},
    {"name": "a", "type": "NOOP"}]})"),
                    "steps[1].name: step \"a\" is given twice");
  BOOST_CHECK_EQUAL(refused(R"({"name": "w", "steps": [{"name": "a", "type": "NOOP"},
    {"name": "b", "type": "NOOP", "priority": 9}]})"),
                    "steps[1].priority must be between 1 and 5 (got 9)");
  BOOST_CHECK_EQUAL(refused(R"({"name": "w", "steps": [{"name": "a", "type": "NOOP",
    "priority": "high"}]})"),
                    "steps[0].priority must be an integer");
  BOOST_CHECK_EQUAL(
      refused(R"({"name": "w", "steps": [{"name": "a", "type": "NOOP", "routing": "all"}]})"),
      "steps[0].routing must be one of any, broadcast (got \"all\")");
  BOOST_CHECK_EQUAL(
      refused(R"({"name": "w", "steps": [{"name": "a", "type": "NOOP", "shards": 2}]})"),
      "steps[0].shards goes with routing broadcast");
  BOOST_CHECK_EQUAL(
      refused(R"({"name": "w", "steps": [{"name": "a", "type": "NOOP", "colour": 1}]})"),
      "unknown field steps[0].colour");
  BOOST_CHECK_EQUAL(refused(R"({"name": "w", "steps": []})"),
                    "steps must be an array of 1 to 10000 steps");
  BOOST_CHECK_EQUAL(refused(R"({"steps": [{"name": "a", "type": "NOOP"}]})"),
                    "name must be 1 to 200 characters");
  BOOST_CHECK_EQUAL(refused(R"({"name": "w", "steps": [{"name": "a b", "type": "NOOP"}]})"),
                    "steps[0].name must be 1 to 100 letters, digits or _.:- (starting with a "
                    "letter or digit)");
  // Sizes are counted before the shards are laid out: tasks, then the edges
  // between every shard of a step and every shard of its parents, then the
  // keys a shard's "#<i>" makes too long.
  BOOST_CHECK_EQUAL(refused(R"({"name": "w", "steps": [
    {"name": "a", "type": "NOOP", "routing": "broadcast", "shards": 10000},
    {"name": "b", "type": "NOOP", "routing": "broadcast", "shards": 10000}]})"),
                    "steps: a workflow has at most 10000 tasks (its shards make more)");
  BOOST_CHECK_EQUAL(refused(R"({"name": "w", "steps": [
    {"name": "a", "type": "NOOP", "routing": "broadcast", "shards": 400},
    {"name": "b", "type": "NOOP", "routing": "broadcast", "shards": 400, "after": ["a"]}]})"),
                    "steps: a workflow has at most 100000 edges between tasks (every shard of "
                    "a step after every shard of its parents makes 160000)");
  BOOST_CHECK_EQUAL(refused(R"({"name": "w", "steps": [{"name": "a", "type": "NOOP",
    "routing": "broadcast", "shards": 2, "key": ")" +
                            std::string(499, 'k') + R"("}]})"),
                    "steps[0].key must be at most 500 characters with its \"#<shard>\"");
  call("POST", "/v1/tasks",
       R"({"type": "NOOP", "key": "taken", "execute_at": "2999-01-01T00:00:00Z"})");
  before = counts();
  auto message = refused(R"({"name": "w", "steps": [{"name": "a", "type": "NOOP"},
    {"name": "b", "type": "NOOP", "key": "taken", "after": ["a"]}]})");
  BOOST_CHECK_MESSAGE(message.find("steps[1].key: task ") == 0 &&
                          message.find("has the key taken already") != std::string::npos,
                      message);
  BOOST_CHECK_EQUAL(counts(), before);
}

BOOST_AUTO_TEST_CASE(a_second_workflow_with_a_key_is_the_first) {
  auto body = R"({"name": "nightly", "key": "nightly-2026-11-29", "steps": [
    {"name": "a", "type": "SLEEP", "payload": {"ms": 1}}, {"name": "b", "type": "NOOP", "after": ["a"]}]})";
  auto first = submit(body);
  auto before = counts();
  auto second = call("POST", "/v1/workflows", body);
  BOOST_CHECK_EQUAL(last_status, 200);
  BOOST_CHECK_EQUAL(second["outcome"], "duplicate");
  BOOST_CHECK_EQUAL(second["id"], first["id"]);
  BOOST_CHECK_EQUAL(second["key"], "nightly-2026-11-29");
  BOOST_CHECK_EQUAL(counts(), before);
}

// A running step is fenced off (its outcome is refused) and a waiting one
// never runs; the workflow says it was cancelled.
BOOST_AUTO_TEST_CASE(cancelling_a_workflow_ends_its_running_and_waiting_steps) {
  auto wf = submit(R"({"name": "w", "steps": [
    {"name": "slow", "type": "SLEEP", "payload": {"ms": 3000}},
    {"name": "next", "type": "NOOP", "after": ["slow"]}, {"name": "side", "type": "NOOP"}]})");
  auto id = wf["id"].get<int64_t>();
  auto slow = step_task(wf, "slow")["id"].get<int64_t>();
  BOOST_REQUIRE(test::eventually([&] {
    return step_task(workflow(id), "slow")["status"] == "running" &&
           step_task(workflow(id), "side")["status"] == "succeeded";
  }));
  BOOST_CHECK_EQUAL(workflow(id)["status"], "running");
  auto attempt =
      db.scalar("SELECT attempt FROM taskmill.tasks WHERE id = $1", {std::to_string(slow)});
  auto cancelled = call("POST", "/v1/workflows/" + std::to_string(id) + "/cancel");
  BOOST_CHECK_EQUAL(last_status, 200);
  BOOST_CHECK_EQUAL(cancelled, json::parse(R"({"cancelled": 2})"));
  wf = workflow(id);
  BOOST_CHECK_EQUAL(wf["status"], "cancelled");
  BOOST_CHECK(wf["cancelled_at"].is_string());
  BOOST_CHECK_EQUAL(step_task(wf, "slow")["status"], "cancelled");
  BOOST_CHECK_EQUAL(step_task(wf, "next")["status"], "cancelled");
  BOOST_CHECK_EQUAL(step_task(wf, "next")["error"], "workflow cancelled");
  BOOST_CHECK_EQUAL(step_task(wf, "side")["status"], "succeeded");
  BOOST_CHECK(!db.complete(slow, std::stoi(attempt), "succeeded"));
  BOOST_CHECK_EQUAL(call("POST", "/v1/workflows/" + std::to_string(id) + "/cancel"),
                    json::parse(R"({"cancelled": 0})"));
}

// A failed step and the steps it cancelled run again; steps that succeeded
// do not.
BOOST_AUTO_TEST_CASE(retrying_a_workflow_runs_its_failed_steps_and_their_dependants_again) {
  auto wf = submit(R"({"name": "w", "steps": [
    {"name": "a", "type": "NOOP"},
    {"name": "b", "type": "STEP", "after": ["a"], "payload": {"fail_first": 1}},
    {"name": "c", "type": "NOOP", "after": ["b"]},
    {"name": "d", "type": "NOOP", "after": [{"step": "b", "on_failure": "skip"}]}]})");
  auto id = wf["id"].get<int64_t>();
  BOOST_REQUIRE(test::eventually([&] { return workflow(id)["status"] == "failed"; }));
  wf = workflow(id);
  BOOST_CHECK_EQUAL(step_task(wf, "b")["status"], "dead");
  BOOST_CHECK_EQUAL(step_task(wf, "c")["status"], "cancelled");
  BOOST_CHECK_EQUAL(step_task(wf, "d")["status"], "stopped");
  auto retried = call("POST", "/v1/workflows/" + std::to_string(id) + "/retry");
  BOOST_CHECK_EQUAL(retried, json::parse(R"({"retried": 3})"));
  BOOST_REQUIRE(test::eventually([&] { return workflow(id)["status"] == "succeeded"; }));
  wf = workflow(id);
  BOOST_CHECK_EQUAL(step_task(wf, "a")["attempt"], 1);
  BOOST_CHECK_EQUAL(step_task(wf, "b")["attempt"], 2);
  BOOST_CHECK_EQUAL(step_task(wf, "c")["attempt"], 1);
  BOOST_CHECK_EQUAL(step_task(wf, "d")["attempt"], 1);
  BOOST_CHECK_EQUAL(call("POST", "/v1/workflows/" + std::to_string(id) + "/retry"),
                    json::parse(R"({"retried": 0})"));
  // A finished workflow stays as it ended.
  BOOST_CHECK_EQUAL(call("POST", "/v1/workflows/" + std::to_string(id) + "/cancel"),
                    json::parse(R"({"cancelled": 0})"));
  BOOST_CHECK_EQUAL(workflow(id)["status"], "succeeded");
}

// A batch's callbacks: on_finish runs once, after its last task, given the
// counts per status; on_success is cancelled, as a task of the batch died.
BOOST_AUTO_TEST_CASE(a_batchs_callbacks_run_once_after_its_last_task) {
  auto answer = call("POST", "/v1/tasks", R"({"tasks": [
    {"type": "NOOP", "key": "n1", "batch": "nightly"},
    {"type": "FAIL", "key": "f1", "batch": "nightly", "max_retries": 0},
    {"type": "SLEEP", "key": "s1", "batch": "nightly", "payload": {"ms": 300}}],
    "on_finish": {"type": "STEP", "payload": {"body": "{}", "report": "ops"}},
    "on_success": {"type": "NOOP", "key": "publish"}})");
  BOOST_REQUIRE_MESSAGE(last_status == 200, answer.dump());
  auto finish = answer["on_finish"]["task"];
  BOOST_CHECK_EQUAL(answer["on_finish"]["outcome"], "created");
  BOOST_CHECK_EQUAL(finish["key"], "nightly:on_finish");
  BOOST_CHECK(finish["execute_at"].is_null());
  auto success = answer["on_success"]["task"];
  BOOST_CHECK_EQUAL(success["key"], "publish");
  auto task = [&](const json& t) {
    return call("GET", "/v1/tasks/" + std::to_string(t["id"].get<int64_t>()));
  };
  BOOST_REQUIRE(test::eventually([&] { return task(finish)["status"] == "succeeded"; }));
  auto delivered = executor.requests_for("nightly:on_finish");
  BOOST_REQUIRE_EQUAL(delivered.size(), 1u);
  BOOST_CHECK_EQUAL(delivered[0].body["payload"],
                    json::parse(R"({"body": "{}", "report": "ops", "batch": "nightly",
                                    "counts": {"succeeded": 2, "dead": 1}})"));
  BOOST_CHECK_EQUAL(task(success)["status"], "cancelled");
  BOOST_CHECK_EQUAL(db.scalar("SELECT max(p.updated_at) <= c.started_at FROM taskmill.tasks p, "
                              "taskmill.tasks c WHERE p.batch = 'nightly' AND c.key = "
                              "'nightly:on_finish' GROUP BY c.started_at"),
                    "t");

  auto before = counts();
  auto refused =
      call("POST", "/v1/tasks", R"({"tasks": [{"type": "NOOP", "key": "n2", "batch": "nightly"}],
    "on_finish": {"type": "NOOP"}})");
  BOOST_CHECK_EQUAL(last_status, 400);
  BOOST_CHECK_EQUAL(refused["error"]["message"], "on_finish: batch nightly has one already (task " +
                                                     std::to_string(finish["id"].get<int64_t>()) +
                                                     ")");
  refused = call("POST", "/v1/tasks", R"({"tasks": [{"type": "NOOP", "key": "a", "batch": "x"},
    {"type": "NOOP", "key": "b"}], "on_success": {"type": "NOOP"}})");
  BOOST_CHECK_EQUAL(
      refused["error"]["message"],
      "tasks[1].batch: on_finish and on_success need every task of the request in one "
      "batch");
  refused = call("POST", "/v1/tasks", R"({"tasks": [{"type": "NOOP", "key": "a", "batch": "x"}],
    "on_finish": {"type": "NOOP", "after": [1]}})");
  BOOST_CHECK_EQUAL(refused["error"]["message"], "unknown field on_finish.after");
  refused = call("POST", "/v1/tasks", R"({"tasks": [{"type": "NOOP", "key": "a", "batch": "x"}],
    "on_finish": {"type": "NOOP", "payload": [1]}})");
  BOOST_CHECK_EQUAL(
      refused["error"]["message"],
      "on_finish.payload must be a JSON object: the batch and its counts are added to it");
  BOOST_CHECK_EQUAL(counts(), before);
}

BOOST_AUTO_TEST_CASE(workflows_are_listed_newest_first_and_unknown_ones_are_404) {
  std::vector<int64_t> ids;
  for (int i = 0; i < 3; ++i)
    ids.push_back(submit(R"({"name": "w)" + std::to_string(i) +
                         R"(", "steps": [{"name": "a", "type": "NOOP"}]})")["id"]
                      .get<int64_t>());
  auto page = call("GET", "/v1/workflows?limit=2");
  BOOST_REQUIRE_EQUAL(page["workflows"].size(), 2u);
  BOOST_CHECK_EQUAL(page["workflows"][0]["id"], ids[2]);
  BOOST_CHECK_EQUAL(page["workflows"][1]["name"], "w1");
  BOOST_CHECK(!page["workflows"][0].contains("steps"));
  page = call("GET", "/v1/workflows?before=" + std::to_string(ids[1]));
  BOOST_CHECK_EQUAL(page["workflows"][0]["id"], ids[0]);
  call("GET", "/v1/workflows/99999999");
  BOOST_CHECK_EQUAL(last_status, 404);
  call("POST", "/v1/workflows/99999999/cancel");
  BOOST_CHECK_EQUAL(last_status, 404);
  call("POST", "/v1/workflows/99999999/retry");
  BOOST_CHECK_EQUAL(last_status, 404);
  auto bad = call("GET", "/v1/workflows/x");
  BOOST_CHECK_EQUAL(last_status, 400);
  BOOST_CHECK_EQUAL(bad["error"]["message"],
                    "the workflow id in the path must be a positive integer, got \"x\"");
  call("GET", "/v1/workflows?limit=0");
  BOOST_CHECK_EQUAL(last_status, 400);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(workflow_rules)

// Parents' results past the bound end the step dead, saying so, and its
// children follow their policies.
BOOST_AUTO_TEST_CASE(a_step_given_too_much_of_its_parents_ends_dead) {
  task_database db{"wf_bound"};
  auto wf = submit_chain(db, "T");
  auto a = db.claim(1);
  BOOST_REQUIRE_EQUAL(a.size(), 1u);
  BOOST_REQUIRE(db.scalar("SELECT applied FROM taskmill.complete_many(ARRAY[$1::bigint], "
                          "ARRAY[1], ARRAY['succeeded'], ARRAY[to_jsonb(repeat('x', 1100000))], "
                          "ARRAY[NULL], 'n1')",
                          {std::to_string(a[0].id)}) == "t");
  auto b = db.by_id(std::stoll(step_id(db, wf, "b")));
  BOOST_CHECK_EQUAL(b.status, "dead");
  BOOST_CHECK_EQUAL(b.error,
                    "the results of its parents take 1100009 bytes, more than the 1048576 a step "
                    "is given");
  BOOST_CHECK_EQUAL(db.by_id(std::stoll(step_id(db, wf, "c"))).status, "cancelled");
  // Dead as a task that spent its retries is: the alerter hears of it.
  BOOST_CHECK_EQUAL(db.scalar("SELECT string_agg(kind, ',') FROM taskmill.alert_inbox WHERE "
                              "task_id = $1",
                              {std::to_string(b.id)}),
                    "dead_task");
  BOOST_CHECK(db.claim(5).empty());
  // Retried with its parent's result as large, it ends dead again, and the
  // step after it is cancelled again, not released.
  BOOST_CHECK_EQUAL(db.scalar("SELECT taskmill.retry_workflow(" + wf + ")"), "2");
  BOOST_CHECK_EQUAL(db.by_id(b.id).status, "dead");
  BOOST_CHECK_EQUAL(db.by_id(std::stoll(step_id(db, wf, "c"))).status, "cancelled");
  BOOST_CHECK(db.claim(5).empty());
  // Retried once its parent's result is smaller, it is given it again.
  db.exec("UPDATE taskmill.tasks SET result = '1' WHERE id = $1", {std::to_string(a[0].id)});
  BOOST_CHECK_EQUAL(db.scalar("SELECT taskmill.retry_workflow(" + wf + ")"), "2");
  BOOST_CHECK_EQUAL(db.scalar("SELECT parent_results::text FROM taskmill.tasks WHERE id = $1",
                              {step_id(db, wf, "b")}),
                    R"({"a": 1})");
}

// A cancel of the workflow and the outcome of its running step, on two
// connections at once: exactly one wins, the other changes nothing.
BOOST_AUTO_TEST_CASE(a_cancel_racing_a_steps_outcome_lets_exactly_one_win) {
  task_database db{"wf_cancel_race"};
  int outcomes_won = 0;
  int cancels_won = 0;
  for (int round = 0; round < 60; ++round) {
    auto wf = submit_chain(db, "R" + std::to_string(round));
    auto claimed = db.claim(1);
    BOOST_REQUIRE_EQUAL(claimed.size(), 1u);
    auto a = std::to_string(claimed[0].id);
    auto attempt = std::to_string(claimed[0].attempt);
    std::latch start{2};
    auto outcome = std::async(std::launch::async, [&] {
      auto conn = db.connect();
      start.arrive_and_wait();
      auto res =
          conn.exec("SELECT applied FROM taskmill.complete_many(ARRAY[" + a + "::bigint], ARRAY[" +
                    attempt + "], ARRAY['succeeded'], ARRAY['1'::jsonb], ARRAY[NULL], 'n1')");
      return res && res->rows() == 1 && res->string(0, 0) == "t";
    });
    auto cancel = std::async(std::launch::async, [&] {
      auto conn = db.connect();
      start.arrive_and_wait();
      auto res = conn.exec("SELECT taskmill.cancel_workflow(" + wf + ")");
      return res ? res->string(0, 0) : std::string{"error"};
    });
    bool applied = outcome.get();
    auto cancelled = cancel.get();
    auto status = db.by_id(claimed[0].id).status;
    if (applied) {
      ++outcomes_won;
      BOOST_CHECK_EQUAL(status, "succeeded");
      BOOST_CHECK_EQUAL(cancelled, "2");
    } else {
      ++cancels_won;
      BOOST_CHECK_EQUAL(status, "cancelled");
      BOOST_CHECK_EQUAL(cancelled, "3");
    }
    BOOST_CHECK_EQUAL(db.scalar("SELECT string_agg(t.status::text, ',' ORDER BY s.position) FROM "
                                "taskmill.workflow_steps s JOIN taskmill.tasks t ON t.id = "
                                "s.task_id WHERE s.workflow_id = $1 AND s.step <> 'a'",
                                {wf}),
                      "cancelled,cancelled");
    BOOST_CHECK(db.claim(5).empty());
  }
  BOOST_TEST_MESSAGE("outcome first " << outcomes_won << ", cancel first " << cancels_won);
}

// A running step rescheduled is recreated: the copy is the step's task,
// given the same parents' results, and the step's children wait for it.
BOOST_AUTO_TEST_CASE(a_running_step_rescheduled_is_still_its_steps_task) {
  task_database db{"wf_reschedule"};
  auto wf = submit_chain(db, "T");
  auto a = db.claim(1);
  BOOST_REQUIRE_EQUAL(a.size(), 1u);
  BOOST_REQUIRE(db.scalar("SELECT applied FROM taskmill.complete_many(ARRAY[$1::bigint], "
                          "ARRAY[1], ARRAY['succeeded'], ARRAY['7'::jsonb], ARRAY[NULL], 'n1')",
                          {std::to_string(a[0].id)}) == "t");
  auto b = db.claim(1);
  BOOST_REQUIRE_EQUAL(b.size(), 1u);
  auto copy = db.call("reschedule('T', '" + wf + "/b', now())");
  BOOST_CHECK_EQUAL(copy.outcome, "recreated");
  BOOST_CHECK_EQUAL(step_id(db, wf, "b"), std::to_string(copy.id));
  BOOST_CHECK_EQUAL(db.scalar("SELECT parent_results::text FROM taskmill.tasks WHERE id = $1",
                              {std::to_string(copy.id)}),
                    R"({"a": 7})");
  BOOST_CHECK_EQUAL(db.scalar("SELECT parent_id FROM taskmill.task_edges WHERE child_id = $1",
                              {step_id(db, wf, "c")}),
                    std::to_string(copy.id));
  BOOST_CHECK_EQUAL(db.scalar("SELECT string_agg(e.parent, ',') FROM "
                              "taskmill.workflow_edges($1::bigint) e WHERE e.child = 'b'",
                              {wf}),
                    "a");
}

// Steps past the purge retention go with their edges; a workflow left
// without steps goes at the next purge.
BOOST_AUTO_TEST_CASE(purging_finished_steps_takes_their_workflow_once_empty) {
  task_database db{"wf_purge"};
  auto wf = submit_chain(db, "T");
  db.exec("SELECT taskmill.cancel_workflow(" + wf + ")");
  db.exec("UPDATE taskmill.workflows SET created_at = now() - interval '2 days'");
  db.exec("UPDATE taskmill.tasks SET updated_at = now() - interval '2 days'");
  auto term = db.seize_lead();
  db.scalar("SELECT taskmill.sweep_purge(86400000, 100, " + term + ")");
  BOOST_CHECK_EQUAL(db.scalar("SELECT count(*) FROM taskmill.workflow_steps"), "0");
  BOOST_CHECK_EQUAL(db.scalar("SELECT count(*) FROM taskmill.task_edges"), "0");
  BOOST_CHECK_EQUAL(db.scalar("SELECT count(*) FROM taskmill.workflows"), "1");
  db.scalar("SELECT taskmill.sweep_purge(86400000, 100, " + term + ")");
  BOOST_CHECK_EQUAL(db.scalar("SELECT count(*) FROM taskmill.workflows"), "0");

  // A dead step purged before the steps that succeeded: the workflow still
  // reads as failed.
  auto failed = submit_chain(db, "T");
  for (const char* step : {"a", "b", "c"}) {
    auto t = db.by_id(std::stoll(step_id(db, failed, step)));
    auto claimed = db.claim(1);
    BOOST_REQUIRE_EQUAL(claimed.size(), 1u);
    db.complete(claimed[0].id, claimed[0].attempt, std::string{step} == "c" ? "dead" : "succeeded",
                "broken");
    BOOST_CHECK_EQUAL(claimed[0].id, t.id);
  }
  auto status = [&] {
    return db.scalar("SELECT status FROM taskmill.workflow_summary(" + failed + ")");
  };
  BOOST_CHECK_EQUAL(status(), "failed");
  db.exec("UPDATE taskmill.tasks SET updated_at = now() - interval '2 days' WHERE status = 'dead'");
  db.scalar("SELECT taskmill.sweep_purge(86400000, 100, " + term + ")");
  BOOST_CHECK_EQUAL(db.scalar("SELECT count(*) FROM taskmill.workflow_steps"), "2");
  BOOST_CHECK_EQUAL(status(), "failed");
}

BOOST_AUTO_TEST_SUITE_END()
