// SPEC §4 executors, end to end: a real node calls a real HTTP server in this
// process, and CAF executors register with it.
#define BOOST_TEST_MODULE executors
#include <boost/test/unit_test.hpp>

#include "actors/http/http_client.hpp"
#include "actors/http/http_server.hpp"
#include "messages/errors.hpp"
#include "tests/support/nodes.hpp"
#include "tests/support/scripted_executor.hpp"
#include "tools/http_fetch.hpp"
#include "tools/node/node.hpp"

#include <caf/event_based_actor.hpp>
#include <caf/send.hpp>
#include <caf/stateful_actor.hpp>

#include <nlohmann/json.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <future>
#include <latch>
#include <map>
#include <mutex>
#include <thread>

using namespace taskmill;
using namespace std::chrono_literals;
using nlohmann::json;

namespace {

struct executor_fixture : test::nodes_fixture {
  executor_fixture() : nodes_fixture("exec") {}
  // The nodes go before the executor they call.
  ~executor_fixture() { stop_nodes(); }

  test::scripted_executor executor;

  node_actors& start(const config& cfg) {
    auto& node = nodes_fixture::start(cfg);
    executor.set_node_api(api_url(node));
    return node;
  }

  /// A node on ports of the system's choosing that claims on wake-ups only
  /// (NOTIFY, freed permits), not by polling.
  config quiet_config(const std::string& name) {
    config cfg;
    cfg.node.name = name;
    cfg.api.listen = "127.0.0.1:0";
    cfg.cluster.listen = "127.0.0.1:0";
    cfg.scheduling.poll_interval = 60s;
    return cfg;
  }

  config http_config(const std::string& url) {
    auto cfg = quiet_config("exec-node");
    task_type_config t;
    t.executor = executor_kind::http;
    t.url = url;
    t.timeout = 2s;
    t.max_retries = 1;
    t.backoff.exponential = false;
    t.backoff.base = 10ms;
    t.backoff.jitter = 0;
    cfg.types["WEB"] = t;
    return cfg;
  }

  /// Submits WEB task `key` with the script as payload and waits until it is
  /// finished; answers its row.
  test::task_row run(const std::string& key, const json& script, const std::string& options = "") {
    db.exec("SELECT taskmill.submit('WEB', $1, payload => $2::jsonb" + options + ")",
            {key, script.dump()});
    BOOST_REQUIRE_MESSAGE(
        test::eventually(
            [&] {
              return db.scalar(
                         "SELECT status IN ('succeeded', 'dead') FROM taskmill.tasks "
                         "WHERE key = $1",
                         {key}) == "t";
            },
            20s),
        "task " << key << " did not finish");
    return db.unit("WEB", key).back();
  }

  std::vector<std::string> outcomes(int64_t id) {
    auto res =
        db.exec("SELECT outcome FROM taskmill.attempt_history WHERE task_id = $1 ORDER BY attempt",
                {std::to_string(id)});
    std::vector<std::string> out;
    for (int i = 0; i < res.rows(); ++i) out.push_back(res.string(i, 0));
    return out;
  }
};

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

std::string status_of(const test::task_database& db, const std::string& key) {
  return db.scalar("SELECT status::text FROM taskmill.tasks WHERE key = $1", {key});
}

/// Waits until task `key` runs; answers its id.
std::string running(const test::task_database& db, const std::string& key) {
  BOOST_REQUIRE_MESSAGE(test::eventually([&] { return status_of(db, key) == "running"; }, 10s),
                        key << " did not start");
  return db.scalar("SELECT id FROM taskmill.tasks WHERE key = $1", {key});
}

/// Starts an HTTP node whose lease is 0.5 s and whose reconciler ticks
/// every 0.1 s, and a WEB task "long" that runs 6 s; answers its id once it
/// runs.
std::string run_long_with_a_short_lease(executor_fixture& f) {
  auto cfg = f.http_config(f.executor.url());
  cfg.heartbeat.interval = 100ms;
  cfg.reconciler.interval = 100ms;
  cfg.types["WEB"].timeout = 30s;
  f.start(cfg);
  f.db.exec(R"(SELECT taskmill.submit('WEB', 'long', payload => '{"delay_ms": 6000}'))");
  return running(f.db, "long");
}

}  // namespace

BOOST_FIXTURE_TEST_SUITE(http_executor, executor_fixture)

BOOST_AUTO_TEST_CASE(a_2xx_answer_succeeds_with_its_json_body_as_result) {
  start(http_config(executor.url()));
  auto t = run("ok", {{"status", 200}, {"body", R"({"answer": 42})"}});
  BOOST_CHECK_EQUAL(t.status, "succeeded");
  BOOST_CHECK_EQUAL(db.scalar("SELECT result::text FROM taskmill.tasks WHERE key = 'ok'"),
                    R"({"answer": 42})");
  auto seen = executor.requests_for("ok");
  BOOST_REQUIRE_EQUAL(seen.size(), 1u);
  const auto& body = seen[0].body;
  BOOST_CHECK_EQUAL(body["id"].get<int64_t>(), t.id);
  BOOST_CHECK_EQUAL(body["type"], "WEB");
  BOOST_CHECK_EQUAL(body["version"], 0);
  BOOST_CHECK_EQUAL(body["attempt"], 1);
  BOOST_CHECK_EQUAL(body["payload"]["status"], 200);
  BOOST_CHECK(body.contains("batch") && body.contains("shard_index") &&
              body.contains("shard_total"));
  BOOST_CHECK_EQUAL(body["trace_id"], t.trace_id);
  BOOST_CHECK_EQUAL(seen[0].idempotency_key, std::to_string(t.id) + "-1");
  BOOST_CHECK_EQUAL(seen[0].traceparent.substr(0, 36), "00-" + t.trace_id + "-");
  BOOST_CHECK_EQUAL(seen[0].traceparent.size(), 55u);
  BOOST_CHECK_EQUAL(seen[0].content_type, "application/json");
}

BOOST_AUTO_TEST_CASE(retryable_answers_are_retried) {
  start(http_config(executor.url()));
  for (int status : {408, 425, 429, 500, 503}) {
    auto key = "s" + std::to_string(status);
    auto t = run(key, {{"status", status}, {"body", "busy"}});
    BOOST_CHECK_EQUAL(t.status, "dead");
    BOOST_CHECK((outcomes(t.id) == std::vector<std::string>{"retry", "retry"}));
    BOOST_CHECK(contains(t.error, "HTTP " + std::to_string(status)));
    BOOST_CHECK_EQUAL(executor.requests_for(key).size(), 2u);
  }
  auto flaky = run("flaky", {{"fail_first", 1}});
  BOOST_CHECK_EQUAL(flaky.status, "succeeded");
  BOOST_CHECK_EQUAL(flaky.attempt, 2);
  BOOST_CHECK_EQUAL(executor.requests_for("flaky")[1].idempotency_key,
                    std::to_string(flaky.id) + "-2");
}

BOOST_AUTO_TEST_CASE(other_4xx_answers_fail_at_once) {
  start(http_config(executor.url()));
  for (int status : {400, 404, 422}) {
    auto key = "c" + std::to_string(status);
    auto t = run(key, {{"status", status}, {"body", "no such thing"}});
    BOOST_CHECK_EQUAL(t.status, "dead");
    BOOST_CHECK((outcomes(t.id) == std::vector<std::string>{"fail"}));
    BOOST_CHECK(contains(t.error, "no such thing"));
  }
}

BOOST_AUTO_TEST_CASE(a_json_outcome_overrides_the_status_code) {
  start(http_config(executor.url()));
  auto failed = run("override-fail",
                    {{"status", 200}, {"body", R"({"outcome": "fail", "error": "bad input"})"}});
  BOOST_CHECK_EQUAL(failed.status, "dead");
  BOOST_CHECK_EQUAL(failed.error, "bad input");
  BOOST_CHECK((outcomes(failed.id) == std::vector<std::string>{"fail"}));
  auto ok = run("override-ok",
                {{"status", 500}, {"body", R"({"outcome": "succeeded", "result": [1, 2]})"}});
  BOOST_CHECK_EQUAL(ok.status, "succeeded");
  BOOST_CHECK_EQUAL(db.scalar("SELECT result::text FROM taskmill.tasks WHERE key = 'override-ok'"),
                    "[1, 2]");
}

BOOST_AUTO_TEST_CASE(a_2xx_without_json_succeeds_and_a_malformed_outcome_is_retried) {
  start(http_config(executor.url()));
  auto plain = run("plain", {{"status", 200}, {"body", "<html>ok"}});
  BOOST_CHECK_EQUAL(plain.status, "succeeded");
  BOOST_CHECK((outcomes(plain.id) == std::vector<std::string>{"succeeded"}));
  BOOST_CHECK_EQUAL(db.scalar("SELECT result IS NULL FROM taskmill.tasks WHERE id = $1",
                              {std::to_string(plain.id)}),
                    "t");
  // Any JSON body is the result, not only an object.
  auto listed = run("json-array", {{"status", 200}, {"body", "[1, 2]"}});
  BOOST_CHECK_EQUAL(listed.status, "succeeded");
  BOOST_CHECK_EQUAL(db.scalar("SELECT result::text FROM taskmill.tasks WHERE id = $1",
                              {std::to_string(listed.id)}),
                    "[1, 2]");
  auto refused = run("plain-500", {{"status", 503}, {"body", "<html>busy"}});
  BOOST_CHECK_EQUAL(refused.status, "dead");
  BOOST_CHECK(contains(refused.error, "HTTP 503"));
  auto unknown = run("unknown-outcome", {{"status", 200}, {"body", R"({"outcome": "maybe"})"}});
  BOOST_CHECK_EQUAL(unknown.status, "dead");
  BOOST_CHECK(contains(unknown.error, "malformed"));
}

BOOST_AUTO_TEST_CASE(a_slow_executor_costs_one_timeout) {
  start(http_config(executor.url()));
  auto t = run("slow", {{"delay_ms", 1500}}, ", timeout_ms => 200, max_retries => 0");
  BOOST_CHECK_EQUAL(t.status, "dead");
  BOOST_CHECK_MESSAGE(contains(t.error, "timed out"), t.error);
  // Meanwhile other tasks are not held up.
  auto quick = run("quick", {{"status", 200}});
  BOOST_CHECK_EQUAL(quick.status, "succeeded");
}

BOOST_AUTO_TEST_CASE(many_hung_executions_cost_one_timeout_together) {
  start(http_config(executor.url()));
  db.exec(
      "SELECT count(taskmill.submit('WEB', 'hung-' || k, payload => '{\"delay_ms\": 4000}', "
      "timeout_ms => 300, max_retries => 0)) FROM generate_series(1, 200) k");
  // While 200 calls hang, other work goes on.
  auto quick = run("beside-the-hung", {{"status", 200}});
  BOOST_CHECK_EQUAL(quick.status, "succeeded");
  BOOST_REQUIRE(test::eventually(
      [&] {
        return db.scalar(
                   "SELECT count(*) FROM taskmill.tasks WHERE key LIKE 'hung-%' AND "
                   "status = 'dead' AND error LIKE '%timed out%'") == "200";
      },
      10s));
  auto span_s =
      std::stod(db.scalar("SELECT extract(epoch from max(updated_at) - min(started_at)) FROM "
                          "taskmill.tasks WHERE key LIKE 'hung-%'"));
  BOOST_TEST_MESSAGE("200 hung calls timed out within " << span_s << " s");
  BOOST_CHECK_LE(span_s, 2.0);
}

BOOST_AUTO_TEST_CASE(an_unreachable_executor_is_retried) {
  // A port nothing listens on: bind one, learn its number, close it.
  uint16_t port = 0;
  {
    auto probe = http_server::start("127.0.0.1", 0, 1024, [](http_request, http_reply) {});
    BOOST_REQUIRE(probe);
    port = (*probe)->port();
  }
  start(http_config("http://127.0.0.1:" + std::to_string(port) + "/work"));
  auto t = run("refused", json::object());
  BOOST_CHECK_EQUAL(t.status, "dead");
  BOOST_CHECK((outcomes(t.id) == std::vector<std::string>{"retry", "retry"}));
  BOOST_CHECK_MESSAGE(contains(t.error, "refused"), t.error);
}

BOOST_AUTO_TEST_CASE(a_202_waits_for_the_result_callback_fenced_by_attempt) {
  auto& node = start(http_config(executor.url()));
  auto t = run("async", {{"delay_ms", 300},
                         {"async", {{"outcome", "succeeded"}, {"result", {{"late", true}}}}}});
  BOOST_CHECK_EQUAL(t.status, "succeeded");
  BOOST_CHECK_EQUAL(db.scalar("SELECT result::text FROM taskmill.tasks WHERE key = 'async'"),
                    R"({"late": true})");
  // A second, stale result is refused and changes nothing.
  auto api = "http://127.0.0.1:" + std::to_string(node.api_port());
  auto stale = http_fetch("POST", api + "/v1/tasks/" + std::to_string(t.id) + "/result",
                          R"({"attempt": 1, "outcome": "fail", "error": "late"})");
  BOOST_REQUIRE(stale);
  BOOST_CHECK_EQUAL(stale->status, 200);
  auto ack = json::parse(stale->body);
  BOOST_CHECK_EQUAL(ack["accepted"], false);
  BOOST_CHECK(contains(ack["reason"].get<std::string>(), "attempt 1"));
  BOOST_CHECK_EQUAL(db.by_id(t.id).status, "succeeded");
}

BOOST_AUTO_TEST_CASE(a_202_without_a_result_times_out) {
  start(http_config(executor.url()));
  auto t = run("never", {{"delay_ms", 5000}, {"async", {{"outcome", "succeeded"}}}},
               ", timeout_ms => 300, max_retries => 0");
  BOOST_CHECK_EQUAL(t.status, "dead");
  BOOST_CHECK_EQUAL(t.error, "timed out waiting for the result");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_FIXTURE_TEST_SUITE(caf_executor, executor_fixture)

namespace {

struct counting_executor_state {
  std::map<int, caf::typed_response_promise<pb::TaskOutcome>> waiting;
  int next = 0;
};

/// Runs each task for 50 ms; fails tasks whose key starts with "bad".
caf::behavior counting_executor(caf::stateful_actor<counting_executor_state>* self,
                                std::atomic<int>* running, std::atomic<int>* most) {
  return {
      [=](execute_atom, const pb::Task& task) -> caf::result<pb::TaskOutcome> {
        auto now = ++*running;
        int seen = most->load();
        while (now > seen && !most->compare_exchange_weak(seen, now)) {
        }
        auto promise = self->make_response_promise<pb::TaskOutcome>();
        auto id = self->state.next++;
        self->state.waiting.emplace(id, promise);
        self->delayed_send(self, 50ms, caf::ok_atom_v, id, task.key().rfind("bad", 0) == 0);
        return promise;
      },
      [=](caf::ok_atom, int id, bool fail) {
        pb::TaskOutcome outcome;
        outcome.set_outcome(fail ? pb::OUTCOME_FAIL : pb::OUTCOME_SUCCEEDED);
        outcome.set_result(R"({"by": "caf"})");
        --*running;
        self->state.waiting.at(id).deliver(std::move(outcome));
        self->state.waiting.erase(id);
      },
  };
}

}  // namespace

BOOST_AUTO_TEST_CASE(registered_executors_run_their_types_within_their_capacity) {
  // Only the executor's freed places may bring the next tasks, not a poll.
  auto cfg = quiet_config("caf-node");
  auto& node = start(cfg);
  std::atomic<int> running{0};
  std::atomic<int> most{0};
  auto executor = sys->spawn(counting_executor, &running, &most);
  pb::ExecutorRegistration registration;
  registration.add_types("CAF_JOB");
  registration.set_capacity(3);
  auto registered = test::ask<int32_t>(*sys, node.dispatcher, register_atom_v,
                                       caf::actor_cast<executor_actor>(executor), registration);
  BOOST_REQUIRE_MESSAGE(registered, test::describe(registered));
  db.exec("SELECT count(taskmill.submit('CAF_JOB', k::text)) FROM generate_series(1, 30) k");
  db.exec("SELECT taskmill.submit('CAF_JOB', 'bad-1')");
  BOOST_REQUIRE(test::eventually(
      [&] {
        return db.scalar(
                   "SELECT count(*) FROM taskmill.tasks WHERE status IN ('succeeded', 'dead')") ==
               "31";
      },
      20s));
  BOOST_CHECK_LE(most.load(), 3);
  BOOST_CHECK_EQUAL(db.scalar("SELECT count(*) FROM taskmill.tasks WHERE status = 'succeeded' AND "
                              "result->>'by' = 'caf'"),
                    "30");
  BOOST_CHECK_EQUAL(db.scalar("SELECT status FROM taskmill.tasks WHERE key = 'bad-1'"), "dead");
  caf::anon_send_exit(executor, caf::exit_reason::user_shutdown);
}

BOOST_AUTO_TEST_CASE(tasks_of_an_executor_that_goes_away_are_retried) {
  config cfg;
  cfg.node.name = "caf-node";
  cfg.api.listen = "127.0.0.1:0";
  cfg.cluster.listen = "127.0.0.1:0";
  auto& node = start(cfg);
  // An executor that never answers, then dies.
  std::atomic<bool> holds_task{false};
  auto silent = sys->spawn([&holds_task](caf::event_based_actor*) -> caf::behavior {
    return {[&holds_task](execute_atom, const pb::Task&) -> caf::result<pb::TaskOutcome> {
      holds_task = true;
      return caf::delegated<pb::TaskOutcome>{};
    }};
  });
  pb::ExecutorRegistration registration;
  registration.add_types("GONE");
  registration.set_capacity(2);
  BOOST_REQUIRE(test::ask<int32_t>(*sys, node.dispatcher, register_atom_v,
                                   caf::actor_cast<executor_actor>(silent), registration));
  db.exec("SELECT taskmill.submit('GONE', 'x', max_retries => 5)");
  // The task is running in the database once claimed, before the executor
  // has it; only an executor that holds it can lose it.
  BOOST_REQUIRE(test::eventually([&] { return holds_task.load(); }));
  caf::anon_send_exit(silent, caf::exit_reason::kill);
  // The attempt it held is a failed attempt at once, not after its timeout.
  // (Read from the history: the task itself may be claimed again meanwhile.)
  std::string attempt;
  BOOST_REQUIRE_MESSAGE(
      test::eventually([&] {
        attempt = db.scalar(
            "SELECT coalesce(max(a.outcome || ':' || coalesce(a.error, '')), 'none') "
            "FROM taskmill.attempts a JOIN taskmill.tasks t ON t.id = a.task_id "
            "WHERE t.key = 'x' AND a.attempt = 1");
        return attempt == "retry:the executor went away";
      }),
      attempt);
  // With no executor left the type is no longer claimed.
  db.exec("UPDATE taskmill.tasks SET execute_at = now() WHERE key = 'x'");
  std::this_thread::sleep_for(500ms);
  BOOST_CHECK_EQUAL(db.scalar("SELECT status FROM taskmill.tasks WHERE key = 'x'"), "failed");
}

BOOST_AUTO_TEST_SUITE_END()

// -- the HTTP client's pooled connections ------------------------------------------

namespace {

/// A bare HTTP/1.1 server on loopback, one connection at a time: it answers
/// every request 200 with "{}" and keeps the connection, or closes it after
/// each answer without saying so (as a server that times idle connections
/// out does), and stops reading while told to hold.
class bare_server {
 public:
  explicit bare_server(bool close_after_answer) : close_after_answer_(close_after_answer) {
    listener_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    BOOST_REQUIRE(::bind(listener_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
    BOOST_REQUIRE(::listen(listener_, 8) == 0);
    socklen_t len = sizeof addr;
    ::getsockname(listener_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread{[this] { serve(); }};
  }

  ~bare_server() {
    release();
    stopping_ = true;
    ::shutdown(listener_, SHUT_RDWR);
    thread_.join();
    ::close(listener_);
  }

  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/run"; }
  int connections() const { return connections_; }

  std::vector<size_t> body_sizes() {
    std::lock_guard<std::mutex> lock{guard_};
    return body_sizes_;
  }

  void hold() {
    std::lock_guard<std::mutex> lock{guard_};
    held_ = true;
  }

  void release() {
    {
      std::lock_guard<std::mutex> lock{guard_};
      held_ = false;
    }
    released_.notify_all();
  }

 private:
  void serve() {
    while (!stopping_) {
      int conn = ::accept(listener_, nullptr, nullptr);
      if (conn < 0) return;
      ++connections_;
      while (answer_one(conn) && !close_after_answer_) {
      }
      ::close(conn);
    }
  }

  /// Reads one request and answers it; false once the client is gone.
  bool answer_one(int conn) {
    std::string in;
    size_t header_end;
    while ((header_end = in.find("\r\n\r\n")) == std::string::npos)
      if (!read_more(conn, in)) return false;
    auto at = in.find("Content-Length: ");
    if (at == std::string::npos || at > header_end) return false;
    size_t length = std::stoul(in.substr(at + 16));
    while (in.size() < header_end + 4 + length)
      if (!read_more(conn, in)) return false;
    {
      std::lock_guard<std::mutex> lock{guard_};
      body_sizes_.push_back(length);
    }
    std::string answer = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}";
    return ::send(conn, answer.data(), answer.size(), MSG_NOSIGNAL) ==
           static_cast<ssize_t>(answer.size());
  }

  bool read_more(int conn, std::string& in) {
    {
      std::unique_lock<std::mutex> lock{guard_};
      released_.wait(lock, [&] { return !held_; });
    }
    char buf[65536];
    auto n = ::recv(conn, buf, sizeof buf, 0);
    if (n <= 0) return false;
    in.append(buf, static_cast<size_t>(n));
    return true;
  }

  bool close_after_answer_;
  int listener_ = -1;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::atomic<int> connections_{0};
  std::mutex guard_;
  std::condition_variable released_;
  bool held_ = false;
  std::vector<size_t> body_sizes_;
  std::thread thread_;
};

/// Posts `body` and waits for the answer.
http_answer post_and_wait(http_client& client, const std::string& url, std::string body) {
  std::promise<http_answer> answered;
  auto answer = answered.get_future();
  http_call call;
  call.url = url;
  call.body = std::move(body);
  client.send(std::move(call), [&](http_answer a) { answered.set_value(std::move(a)); });
  BOOST_REQUIRE(answer.wait_for(10s) == std::future_status::ready);
  return answer.get();
}

}  // namespace

namespace {

struct race_result {
  std::string id;
  bool outcome_applied = false;
  std::string other;  // what `other_sql` answered
};

/// Claims a new task `key`, then, on two connections at once, reports its
/// outcome (succeeded) and runs `other_sql` ($1: the task's id).
race_result race_with_outcome(const test::task_database& db, const std::string& key,
                              const std::string& other_sql) {
  db.exec("SELECT taskmill.submit('RACE', $1)", {key});
  auto claimed = db.claim(1);
  BOOST_REQUIRE_EQUAL(claimed.size(), 1u);
  race_result r;
  r.id = std::to_string(claimed[0].id);
  std::latch go{2};
  std::thread outcome{[&] {
    auto conn = db.connect();
    go.arrive_and_wait();
    auto res = conn.exec(
        "SELECT applied FROM taskmill.complete_many(ARRAY[$1::bigint], ARRAY[1], "
        "ARRAY['succeeded'], ARRAY[NULL::jsonb], ARRAY[NULL], 'n1')",
        {r.id});
    r.outcome_applied = res && res->boolean(0, 0);
  }};
  {
    auto conn = db.connect();
    go.arrive_and_wait();
    auto res = conn.exec(other_sql, {r.id});
    BOOST_REQUIRE_MESSAGE(res, test::describe(res));
    r.other = res->string(0, 0);
  }
  outcome.join();
  return r;
}

}  // namespace

// SPEC §3: a running attempt cancelled is fenced at once, and its executor
// is told, whichever kind it is; the node frees its place at once.
BOOST_FIXTURE_TEST_SUITE(cancels, executor_fixture)

BOOST_AUTO_TEST_CASE(an_http_executor_gets_a_delete_and_the_next_task_runs_at_once) {
  auto cfg = http_config(executor.url());
  auto& web = cfg.types["WEB"];
  web.running_limit = 1;
  web.timeout = 30s;
  web.cancel_url = executor.url().substr(0, executor.url().rfind('/')) + "/cancel";
  start(cfg);
  db.exec(R"(SELECT taskmill.submit('WEB', 'long', payload => '{"delay_ms": 6000}'))");
  auto id = running(db, "long");
  db.exec("SELECT taskmill.submit('WEB', 'next')");
  BOOST_CHECK_EQUAL(db.call("cancel(" + id + "::bigint)").outcome, "cancelled");
  BOOST_REQUIRE(test::eventually([&] { return !executor.cancels_for("long").empty(); }, 5s));
  auto cancel = executor.cancels_for("long").front();
  BOOST_CHECK_EQUAL(cancel.body, json::parse(R"({"id": )" + id +
                                             R"(, "type": "WEB", "key": "long", "attempt": 1})"));
  BOOST_CHECK_EQUAL(cancel.idempotency_key, id + "-1");
  BOOST_CHECK_EQUAL(cancel.path, "/cancel");
  // The long task's place under the limit of one is free now, not in 6 s.
  BOOST_CHECK(test::eventually([&] { return status_of(db, "next") == "succeeded"; }, 3s));
  BOOST_CHECK_EQUAL(status_of(db, "long"), "cancelled");
  BOOST_CHECK(test::eventually(
      [&] { return db.scalar("SELECT count(*) FROM taskmill.cancel_requests") == "0"; }, 5s));
  BOOST_CHECK_EQUAL(executor.cancels_for("next").size(), 0u);
}

// A cancel taken stays until told; one tried ten times is taken no more; a
// node of the release before, which never tells, takes a cancel once.
BOOST_AUTO_TEST_CASE(a_cancel_is_done_once_told_or_taken_by_a_node_of_the_release_before) {
  auto request = [&](int id, int tries) {
    db.exec(
        "INSERT INTO taskmill.cancel_requests (task_id, attempt, node, type, key, "
        "created_at, tries) VALUES (" +
        std::to_string(id) + ", 1, 'n1', 'WEB', 'k', now(), " + std::to_string(tries) + ")");
  };
  auto take = [&](const std::string& args) {
    return db.scalar("SELECT count(*) FROM taskmill.take_cancels('n1', '{}', 60000" + args + ")");
  };
  auto left = [&] { return db.scalar("SELECT count(*) FROM taskmill.cancel_requests"); };
  db.exec("SELECT taskmill.register_node('n1', 'i1', '', 60000, NULL)");
  request(1, 0);
  BOOST_CHECK_EQUAL(take(", 60000"), "1");
  BOOST_CHECK_EQUAL(take(", 60000"), "0");
  BOOST_CHECK_EQUAL(left(), "1");
  BOOST_CHECK_EQUAL(db.scalar("SELECT taskmill.cancels_told('{1}', '{1}')"), "1");
  BOOST_CHECK_EQUAL(left(), "0");
  request(2, 10);
  BOOST_CHECK_EQUAL(take(", 0"), "0");
  db.exec("DELETE FROM taskmill.cancel_requests");
  request(3, 0);
  BOOST_CHECK_EQUAL(take(""), "1");
  BOOST_CHECK_EQUAL(left(), "0");
}

// A cancel stays until its executor heard it: one refused is sent again,
// after the node's lease, doubled at each try; once heard, no more.
BOOST_AUTO_TEST_CASE(a_cancel_is_sent_again_until_the_executor_hears_it) {
  executor.refuse_cancels(2);
  auto id = run_long_with_a_short_lease(*this);
  BOOST_CHECK_EQUAL(db.call("cancel(" + id + "::bigint)").outcome, "cancelled");
  BOOST_REQUIRE_MESSAGE(
      test::eventually([&] { return executor.cancels_for("long").size() >= 3; }, 10s),
      executor.cancels_for("long").size() << " cancels sent");
  BOOST_CHECK(test::eventually(
      [&] { return db.scalar("SELECT count(*) FROM taskmill.cancel_requests") == "0"; }, 5s));
  std::this_thread::sleep_for(1500ms);
  BOOST_CHECK_EQUAL(executor.cancels_for("long").size(), 3u);
}

// A cancel taken by a node that went away before its executor heard it is
// taken again at once by a live node, whatever its tries' backoff.
BOOST_AUTO_TEST_CASE(a_cancel_whose_taker_went_away_untold_is_sent_by_a_live_node) {
  auto id = run_long_with_a_short_lease(*this);
  // Taken for the fifth time (a backoff of 8 s) by a node gone since.
  db.exec("BEGIN; SELECT taskmill.cancel(" + id +
          "::bigint); UPDATE taskmill.cancel_requests SET taken_by = 'gone', taken_at = now(), "
          "tries = 5; COMMIT");
  BOOST_CHECK(test::eventually([&] { return executor.cancels_for("long").size() == 1; }, 3s));
  BOOST_CHECK(test::eventually(
      [&] { return db.scalar("SELECT count(*) FROM taskmill.cancel_requests") == "0"; }, 3s));
}

BOOST_AUTO_TEST_CASE(a_caf_executor_gets_the_cancel_and_its_place_back) {
  auto cfg = quiet_config("caf-node");
  auto& node = start(cfg);
  std::atomic<int> held{0};
  std::atomic<int64_t> cancelled_task{0};
  std::atomic<int32_t> cancelled_attempt{0};
  auto dispatcher = node.dispatcher;
  auto holder = sys->spawn([&, dispatcher](caf::event_based_actor* self) -> caf::behavior {
    return {
        [&, self, dispatcher](execute_atom, const pb::Task& task) -> caf::result<pb::TaskOutcome> {
          ++held;
          // It tells the node how far it got.
          pb::Progress progress;
          progress.set_attempt(task.attempt());
          progress.set_processed(7);
          self->request(dispatcher, 5s, progress_atom_v, task.id(), progress)
              .then([](const pb::ResultAck&) {});
          return caf::delegated<pb::TaskOutcome>{};
        },
        [&](cancel_atom, int64_t task, int32_t attempt) {
          cancelled_attempt = attempt;
          cancelled_task = task;
        }};
  });
  pb::ExecutorRegistration registration;
  registration.add_types("HOLD");
  registration.set_capacity(1);
  BOOST_REQUIRE(test::ask<int32_t>(*sys, node.dispatcher, register_atom_v,
                                   caf::actor_cast<executor_actor>(holder), registration));
  db.exec("SELECT taskmill.submit('HOLD', 'held')");
  auto id = running(db, "held");
  BOOST_REQUIRE(test::eventually([&] { return held.load() == 1; }));
  BOOST_CHECK(test::eventually([&] {
    return db.scalar("SELECT coalesce(max(processed), 0) FROM taskmill.task_progress") == "7";
  }));
  db.exec("SELECT taskmill.submit('HOLD', 'after')");
  db.call("cancel('HOLD', 'held')");
  BOOST_CHECK(test::eventually([&] { return cancelled_task.load() == std::stoll(id); }, 5s));
  BOOST_CHECK_EQUAL(cancelled_attempt.load(), 1);
  // The executor's one place is free: the next task goes to it.
  BOOST_CHECK(test::eventually([&] { return held.load() == 2; }, 5s));
  caf::anon_send_exit(holder, caf::exit_reason::user_shutdown);
}

BOOST_AUTO_TEST_CASE(a_sleep_ends_and_its_place_goes_to_the_next_task) {
  auto cfg = quiet_config("sleep-node");
  task_type_config nap;
  nap.executor = executor_kind::sleep;
  nap.timeout = 120s;
  nap.running_limit = 1;
  cfg.types["NAP"] = nap;
  start(cfg);
  db.exec("SELECT taskmill.submit('NAP', 'long', payload => '60000')");
  running(db, "long");
  db.exec("SELECT taskmill.submit('NAP', 'short', payload => '10')");
  db.call("cancel('NAP', 'long')");
  BOOST_CHECK(test::eventually([&] { return status_of(db, "short") == "succeeded"; }, 3s));
  BOOST_CHECK(test::eventually([&] {
    return contains(http_fetch("GET", api_url(nodes.front()) + "/metrics")->body,
                    "taskmill_executions_cancelled_total 1");
  }));
}

// Tasks handed to the node in their submit's commit and cancelled at once,
// round after round: the cancel may reach the node before the hand-off
// does. Whatever ran is told to stop, and no place stays taken.
BOOST_AUTO_TEST_CASE(a_task_cancelled_as_it_is_handed_off_is_stopped_or_never_runs) {
  auto cfg = http_config(executor.url());
  cfg.types["WEB"].timeout = 30s;
  auto& node = start(cfg);
  constexpr int rounds = 30;
  for (int round = 0; round < rounds; ++round) {
    auto key = "handed-" + std::to_string(round);
    db.exec(R"(SELECT taskmill.submit('WEB', $1, payload => '{"delay_ms": 2000}'))", {key});
    db.call("cancel('WEB', '" + key + "')");
  }
  BOOST_CHECK_EQUAL(db.scalar("SELECT count(*) FROM taskmill.tasks WHERE status = 'cancelled'"),
                    std::to_string(rounds));
  BOOST_TEST_MESSAGE(db.scalar("SELECT count(*) FROM taskmill.tasks WHERE attempt > 0")
                     << " of " << rounds << " were running when cancelled");
  for (int round = 0; round < rounds; ++round) {
    auto key = "handed-" + std::to_string(round);
    BOOST_CHECK_MESSAGE(test::eventually([&] {
                          return executor.requests_for(key).empty() ||
                                 !executor.cancels_for(key).empty();
                        }),
                        key << " ran and was not told to stop");
  }
  BOOST_CHECK(test::eventually([&] {
    auto in_flight = test::in_flight(*sys, node.limiter);
    return in_flight && *in_flight == 0;
  }));
  // Each attempt the node took is counted stopped once, whether its cancel
  // came before its hand-off or after.
  auto taken = db.scalar("SELECT count(*) FROM taskmill.tasks WHERE attempt > 0");
  std::string counted;
  BOOST_CHECK_MESSAGE(test::eventually([&] {
                        auto metrics = http_fetch("GET", api_url(node) + "/metrics")->body;
                        auto at = metrics.find("\ntaskmill_executions_cancelled_total ") + 1;
                        counted = metrics.substr(at, metrics.find('\n', at) - at);
                        return counted == "taskmill_executions_cancelled_total " + taken;
                      }),
                      counted << " for " << taken << " taken");
}

// A cancel and the outcome of the same attempt, on two connections at once,
// round after round: exactly one applies; the executor is told only of a
// cancel that won.
BOOST_AUTO_TEST_CASE(a_cancel_racing_the_outcome_lets_exactly_one_win) {
  int cancels_won = 0;
  for (int round = 0; round < 40; ++round) {
    auto r = race_with_outcome(db, "race-" + std::to_string(round),
                               "SELECT outcome FROM taskmill.cancel($1::bigint)");
    bool cancelled = r.other == "cancelled";
    BOOST_CHECK_MESSAGE(r.outcome_applied != cancelled, "round " << round << ": outcome "
                                                                 << r.outcome_applied << ", cancel "
                                                                 << r.other);
    BOOST_CHECK_EQUAL(
        db.scalar("SELECT count(*) FROM taskmill.cancel_requests WHERE task_id = $1", {r.id}),
        cancelled ? "1" : "0");
    cancels_won += cancelled;
  }
  BOOST_TEST_MESSAGE("cancels won " << cancels_won << " of 40 rounds");
}

BOOST_AUTO_TEST_SUITE_END()

// A running attempt reports how far it got: fenced by attempt, kept beside
// the task, summed over its batch.
BOOST_FIXTURE_TEST_SUITE(progress, executor_fixture)

BOOST_AUTO_TEST_CASE(a_running_attempt_reports_progress_fenced_by_its_attempt) {
  auto cfg = http_config(executor.url());
  cfg.types["WEB"].timeout = 30s;
  auto& node = start(cfg);
  auto base = api_url(node);
  db.exec(
      R"(SELECT taskmill.submit('WEB', 'slow', payload => '{"delay_ms": 3000}', batch => 'nightly'))");
  BOOST_REQUIRE(test::eventually([&] {
    return db.scalar("SELECT status::text FROM taskmill.tasks WHERE key = 'slow'") == "running";
  }));
  auto id = db.scalar("SELECT id FROM taskmill.tasks WHERE key = 'slow'");
  auto post = [&](const std::string& body) {
    auto res = http_fetch("POST", base + "/v1/tasks/" + id + "/progress", body);
    BOOST_REQUIRE_MESSAGE(res, test::describe(res));
    return std::pair{res->status, json::parse(res->body, nullptr, false)};
  };
  auto [status, ack] = post(
      R"({"attempt": 1, "progress": 0.25, "processed": 100, "failed": 3, "message": "page 1"})");
  BOOST_CHECK_EQUAL(status, 200);
  BOOST_CHECK_EQUAL(ack["accepted"], true);
  // A later report keeps the progress and message it leaves out.
  BOOST_CHECK_EQUAL(post(R"({"attempt": 1, "processed": 200, "failed": 5})").second["accepted"],
                    true);
  auto task = json::parse(http_fetch("GET", base + "/v1/tasks/" + id)->body);
  auto progress = task["progress"];
  BOOST_CHECK_EQUAL(progress["attempt"], 1);
  BOOST_CHECK_EQUAL(progress["progress"], 0.25);
  BOOST_CHECK_EQUAL(progress["processed"], 200);
  BOOST_CHECK_EQUAL(progress["failed"], 5);
  BOOST_CHECK_EQUAL(progress["message"], "page 1");
  BOOST_CHECK(progress["reported_at"].is_string());
  auto batch = json::parse(http_fetch("GET", base + "/v1/batches/nightly")->body);
  BOOST_CHECK_EQUAL(batch["records"], json::parse(R"({"processed": 200, "failed": 5})"));
  // Not the attempt that runs: refused, nothing changed.
  auto stale = post(R"({"attempt": 2, "processed": 999})").second;
  BOOST_CHECK_EQUAL(stale["accepted"], false);
  BOOST_CHECK(contains(stale.value("reason", ""), "attempt 2"));
  for (auto [body, part] : {std::pair{R"({"attempt": 1, "progress": 1.5})",
                                      "progress must be between 0 and 1 (got 1.5)"},
                            std::pair{R"({"attempt": 1, "processed": 1, "failed": 2})",
                                      "failed must be at most processed (1)"},
                            std::pair{R"({"processed": 1})", "attempt is required"},
                            std::pair{R"({"attempt": 1, "processed": -1})", "processed must be"},
                            std::pair{R"({"attempt": 1, "colour": 1})", "unknown field colour"}}) {
    auto [code, error] = post(body);
    BOOST_CHECK_EQUAL(code, 400);
    BOOST_CHECK_MESSAGE(contains(error.dump(), part), error.dump() << " lacks " << part);
  }
  // Once the attempt ended, its reports change nothing.
  BOOST_REQUIRE(test::eventually(
      [&] {
        return db.scalar("SELECT status::text FROM taskmill.tasks WHERE key = 'slow'") ==
               "succeeded";
      },
      10s));
  BOOST_CHECK_EQUAL(post(R"({"attempt": 1, "processed": 300})").second["accepted"], false);
  BOOST_CHECK_EQUAL(db.scalar("SELECT processed FROM taskmill.task_progress"), "200");
  auto unknown = http_fetch("POST", base + "/v1/tasks/999999/progress", R"({"attempt": 1})");
  BOOST_CHECK_EQUAL(unknown->status, 200);
}

// SPEC §4: an attempt of a type with a heartbeat timeout that says nothing
// for that long is taken back as a lost node's is, and its executor is told
// to stop; one that reports in time (a bare heartbeat is a report) runs on.
BOOST_AUTO_TEST_CASE(a_silent_attempt_is_taken_back_and_a_reporting_one_runs_on) {
  auto cfg = http_config(executor.url());
  auto& web = cfg.types["WEB"];
  web.timeout = 30s;
  web.heartbeat_timeout = 1s;
  web.max_retries = 0;
  cfg.watcher.interval = 200ms;
  auto& node = start(cfg);
  auto base = api_url(node);
  db.exec(R"(SELECT taskmill.submit('WEB', 'silent', payload => '{"delay_ms": 8000}'))");
  db.exec(R"(SELECT taskmill.submit('WEB', 'talking', payload => '{"delay_ms": 2500}'))");
  auto silent = running(db, "silent");
  auto talking = running(db, "talking");
  std::atomic<bool> done{false};
  std::thread heartbeats{[&] {
    while (!done) {
      auto res =
          http_fetch("POST", base + "/v1/tasks/" + talking + "/progress", R"({"attempt": 1})");
      if (!res || res->status != 200) break;
      std::this_thread::sleep_for(300ms);
    }
  }};
  BOOST_CHECK(test::eventually([&] { return status_of(db, "silent") == "dead"; }, 5s));
  BOOST_CHECK((outcomes(std::stoll(silent)) == std::vector<std::string>{"silent"}));
  BOOST_CHECK(contains(db.scalar("SELECT error FROM taskmill.tasks WHERE id = $1", {silent}),
                       "heartbeat timeout"));
  BOOST_CHECK(test::eventually([&] { return !executor.cancels_for("silent").empty(); }, 5s));
  BOOST_CHECK(test::eventually([&] { return status_of(db, "talking") == "succeeded"; }, 10s));
  done = true;
  heartbeats.join();
  BOOST_CHECK((outcomes(std::stoll(talking)) == std::vector<std::string>{"succeeded"}));
}

// SPEC §4: a long attempt moves its own deadline, later only and up to its
// type's max timeout after its start; the node and the watcher both keep
// to the moved deadline.
BOOST_AUTO_TEST_CASE(an_attempt_moves_its_deadline_up_to_the_max_timeout) {
  auto cfg = http_config(executor.url());
  auto& web = cfg.types["WEB"];
  web.timeout = 1s;
  web.max_timeout = 4s;
  cfg.watcher.interval = 200ms;
  auto& node = start(cfg);
  auto base = api_url(node);
  db.exec(R"(SELECT taskmill.submit('WEB', 'moved', payload => '{"delay_ms": 2500}'))");
  db.exec(R"(SELECT taskmill.submit('WEB', 'greedy', payload => '{"delay_ms": 7000}'))");
  db.exec(R"(SELECT taskmill.submit('WEB', 'fixed', payload => '{"delay_ms": 2500}'))");
  auto moved = running(db, "moved");
  auto greedy = running(db, "greedy");
  running(db, "fixed");
  auto ask = [&](const std::string& id, const std::string& body) {
    auto res = http_fetch("POST", base + "/v1/tasks/" + id + "/progress", body);
    BOOST_REQUIRE_MESSAGE(res && res->status == 200, test::describe(res));
    BOOST_CHECK_EQUAL(json::parse(res->body)["accepted"], true);
  };
  ask(moved, R"({"attempt": 1, "deadline_in_ms": 3000})");
  ask(moved, R"({"attempt": 1, "deadline_in_ms": 1})");  // never earlier
  ask(greedy, R"({"attempt": 1, "deadline_in_ms": 600000})");
  auto after_start = [&](const std::string& id) {
    return std::stod(
        db.scalar("SELECT extract(epoch FROM p.deadline_at - t.started_at) FROM taskmill.tasks t "
                  "JOIN taskmill.task_progress p ON p.task_id = t.id WHERE t.id = $1",
                  {id}));
  };
  BOOST_CHECK_GT(after_start(moved), 2.5);
  BOOST_CHECK_CLOSE(after_start(greedy), 4.0, 0.1);
  auto task = json::parse(http_fetch("GET", base + "/v1/tasks/" + moved)->body);
  BOOST_CHECK(task["progress"]["deadline_at"].is_string());
  BOOST_CHECK(test::eventually([&] { return status_of(db, "moved") == "succeeded"; }, 6s));
  BOOST_CHECK((outcomes(std::stoll(moved)) == std::vector<std::string>{"succeeded"}));
  // Without a report, the timeout holds; past the max, the moved deadline.
  BOOST_CHECK(test::eventually([&] { return status_of(db, "fixed") != "running"; }, 5s));
  BOOST_CHECK_EQUAL(
      outcomes(std::stoll(db.scalar("SELECT id FROM taskmill.tasks WHERE key = 'fixed'"))).front(),
      "retry");
  BOOST_CHECK(test::eventually([&] { return status_of(db, "greedy") != "running"; }, 6s));
  auto greedy_run = std::stod(
      db.scalar("SELECT extract(epoch FROM finished_at - started_at) FROM taskmill.attempt_history "
                "WHERE task_id = $1 AND attempt = 1",
                {greedy}));
  BOOST_CHECK_GT(greedy_run, 3.9);
  BOOST_CHECK_LT(greedy_run, 5.5);
  auto bad = http_fetch("POST", base + "/v1/tasks/" + greedy + "/progress",
                        R"({"attempt": 2, "deadline_in_ms": 0})");
  BOOST_CHECK_EQUAL(bad->status, 400);
  BOOST_CHECK(contains(bad->body, "deadline_in_ms"));
}

// SPEC §4: an execution logs lines for its attempt; they are kept per
// attempt (the last 1,000), read after a line id, refused for an attempt
// that is not the task's latest; an HTTP executor's failed answer is kept
// in its attempt's log; the lines go with the task when it is purged.
BOOST_AUTO_TEST_CASE(an_attempt_logs_lines_kept_bounded_and_read_after_an_id) {
  auto cfg = http_config(executor.url());
  cfg.types["WEB"].timeout = 30s;
  auto& node = start(cfg);
  auto base = api_url(node);
  db.exec(R"(SELECT taskmill.submit('WEB', 'chatty', payload => '{"delay_ms": 3000}'))");
  auto id = running(db, "chatty");
  auto post = [&](const json& body) {
    auto res = http_fetch("POST", base + "/v1/tasks/" + id + "/logs", body.dump());
    BOOST_REQUIRE_MESSAGE(res, test::describe(res));
    return std::pair{res->status, json::parse(res->body, nullptr, false)};
  };
  auto read = [&](const std::string& query) {
    auto res = http_fetch("GET", base + "/v1/tasks/" + id + "/logs" + query);
    BOOST_REQUIRE_MESSAGE(res && res->status == 200, test::describe(res));
    return json::parse(res->body);
  };
  BOOST_CHECK_EQUAL(post({{"attempt", 1}, {"lines", {"opened the file", "page 1"}}}).second,
                    json::parse(R"({"accepted": true})"));
  auto first = read("");
  BOOST_REQUIRE_EQUAL(first["lines"].size(), 2u);
  BOOST_CHECK_EQUAL(first["lines"][0]["line"], "opened the file");
  BOOST_CHECK_EQUAL(first["lines"][1]["attempt"], 1);
  BOOST_CHECK_EQUAL(first["status"], "running");
  auto after = first["next_after"].get<int64_t>();
  BOOST_CHECK_EQUAL(after, first["lines"][1]["id"].get<int64_t>());
  // 1,200 more lines, from ten callers at once: the attempt keeps the last
  // 1,000, in order, each cut at 4,096 characters.
  std::vector<std::thread> callers;
  for (int c = 0; c < 10; ++c)
    callers.emplace_back([&, c] {
      json lines = json::array();
      for (int i = 0; i < 120; ++i)
        lines.push_back(std::to_string(c) + ":" + std::to_string(i) +
                        std::string(5000 * (i == 0), 'x'));
      auto res = http_fetch("POST", base + "/v1/tasks/" + id + "/logs",
                            json{{"attempt", 1}, {"lines", lines}}.dump());
      BOOST_CHECK(res && res->status == 200);
    });
  for (auto& t : callers) t.join();
  BOOST_CHECK_EQUAL(
      db.scalar("SELECT count(*) FROM taskmill.attempt_logs WHERE task_id = $1", {id}), "1000");
  BOOST_CHECK_EQUAL(db.scalar("SELECT max(length(line)) FROM taskmill.attempt_logs"), "4096");
  auto newer = read("?after=" + std::to_string(after) + "&limit=5");
  BOOST_CHECK_EQUAL(newer["lines"].size(), 5u);
  BOOST_CHECK_GT(newer["lines"][0]["id"].get<int64_t>(), after);
  // Not the task's latest attempt, or bad input: refused, nothing stored.
  auto stale = post({{"attempt", 2}, {"lines", {"late"}}}).second;
  BOOST_CHECK_EQUAL(stale["accepted"], false);
  for (auto [body, part] :
       {std::pair{json{{"attempt", 1}, {"lines", json::array()}}, "lines must hold 1 to 1000"},
        std::pair{json{{"attempt", 1}, {"lines", {1}}}, "lines[0] must be a string"},
        std::pair{json{{"lines", {"x"}}}, "attempt is required"},
        std::pair{json{{"attempt", 1}, {"lines", "x"}}, "lines must be an array"}}) {
    auto [code, error] = post(body);
    BOOST_CHECK_EQUAL(code, 400);
    BOOST_CHECK_MESSAGE(contains(error.dump(), part), error.dump() << " lacks " << part);
  }
  for (auto query : {"?after=-1", "?limit=0", "?colour=red"})
    BOOST_CHECK_EQUAL(http_fetch("GET", base + "/v1/tasks/" + id + "/logs" + query)->status, 400);
  BOOST_CHECK_EQUAL(http_fetch("GET", base + "/v1/tasks/999999/logs")->status, 404);
  BOOST_CHECK_EQUAL(db.scalar("SELECT count(*) FROM taskmill.attempt_logs WHERE line = 'late'"),
                    "0");
  // A failed answer's body is kept in its attempt's log.
  auto failed = run("refused", {{"status", 400}, {"body", "bad row 7\nbad row 9"}});
  BOOST_CHECK_EQUAL(failed.status, "dead");
  BOOST_CHECK(test::eventually([&] {
    return db.scalar(
               "SELECT string_agg(line, '|' ORDER BY id) FROM taskmill.attempt_logs "
               "WHERE task_id = $1",
               {std::to_string(failed.id)}) ==
           "the executor answered HTTP 400:|bad row 7|bad row 9";
  }));
  // Purged with its task.
  BOOST_REQUIRE(test::eventually([&] { return status_of(db, "chatty") == "succeeded"; }, 10s));
  db.exec("UPDATE taskmill.tasks SET status = 'stopped', updated_at = now() - interval '1 day'");
  auto term = db.seize_lead();
  db.exec("SELECT taskmill.sweep_purge(1000, 100, " + term + ")");
  BOOST_CHECK_EQUAL(db.scalar("SELECT count(*) FROM taskmill.attempt_logs"), "0");
}

// Reports and the outcome of the same attempt, on two connections at once,
// round after round: a report stored came before the outcome; one that came
// after is refused and leaves no row.
BOOST_AUTO_TEST_CASE(a_report_racing_the_outcome_never_lands_after_it) {
  int reports_won = 0;
  for (int round = 0; round < 40; ++round) {
    auto r = race_with_outcome(
        db, "race-" + std::to_string(round),
        "SELECT applied::text FROM taskmill.report_progress(ARRAY[$1::bigint], ARRAY[1], "
        "ARRAY[0.5::real], ARRAY[10::bigint], ARRAY[1::bigint], ARRAY['half'])");
    bool applied = r.other == "true";
    BOOST_CHECK(r.outcome_applied);
    BOOST_CHECK_EQUAL(
        db.scalar("SELECT count(*) FROM taskmill.task_progress WHERE task_id = $1", {r.id}),
        applied ? "1" : "0");
    reports_won += applied;
  }
  BOOST_TEST_MESSAGE("reports before the outcome in " << reports_won << " of 40 rounds");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(http_client_pool)

BOOST_AUTO_TEST_CASE(one_kept_connection_carries_one_call_after_another) {
  bare_server server{false};
  http_client client;
  for (int i = 0; i < 20; ++i) {
    auto answer = post_and_wait(client, server.url(), std::string(static_cast<size_t>(i), 'x'));
    BOOST_CHECK_EQUAL(answer.status, 200);
    BOOST_CHECK_EQUAL(answer.body, "{}");
  }
  BOOST_CHECK_EQUAL(server.connections(), 1);
  auto sizes = server.body_sizes();
  BOOST_REQUIRE_EQUAL(sizes.size(), 20u);
  for (size_t i = 0; i < sizes.size(); ++i) BOOST_CHECK_EQUAL(sizes[i], i);
}

BOOST_AUTO_TEST_CASE(a_kept_connection_the_server_closed_is_replaced_by_a_new_one) {
  bare_server server{true};
  http_client client;
  for (int i = 0; i < 5; ++i) {
    // The server's close reaches the client's pool before the next call.
    std::this_thread::sleep_for(50ms);
    auto answer = post_and_wait(client, server.url(), "{}");
    BOOST_CHECK_EQUAL(answer.status, 200);
    BOOST_CHECK_EQUAL(answer.error, "");
  }
  BOOST_CHECK_EQUAL(server.connections(), 5);
  BOOST_CHECK_EQUAL(server.body_sizes().size(), 5u);
}

BOOST_AUTO_TEST_CASE(a_call_larger_than_the_socket_takes_does_not_hold_up_its_caller) {
  bare_server server{false};
  http_client client;
  BOOST_REQUIRE_EQUAL(post_and_wait(client, server.url(), "{}").status, 200);
  // The server reads nothing more until the caller is back: a caller that
  // waited for the whole request to go out would wait for ever.
  server.hold();
  constexpr size_t large = 64 << 20;
  std::promise<http_answer> answered;
  auto answer = answered.get_future();
  http_call call;
  call.url = server.url();
  call.body = std::string(large, 'x');
  call.timeout = 30s;
  auto posted = std::async(std::launch::async, [&] {
    client.send(std::move(call), [&](http_answer a) { answered.set_value(std::move(a)); });
  });
  bool back = posted.wait_for(5s) == std::future_status::ready;
  server.release();
  BOOST_CHECK_MESSAGE(back, "the caller waited for the request to be sent");
  BOOST_REQUIRE(answer.wait_for(30s) == std::future_status::ready);
  BOOST_CHECK_EQUAL(answer.get().status, 200);
  BOOST_CHECK_EQUAL(server.connections(), 1);
  auto sizes = server.body_sizes();
  BOOST_REQUIRE_EQUAL(sizes.size(), 2u);
  BOOST_CHECK_EQUAL(sizes[1], large);
}

BOOST_AUTO_TEST_SUITE_END()
