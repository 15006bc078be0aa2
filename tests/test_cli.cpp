// The taskmill command line against a real node: the built binary (from
// TASKMILL_BINARY) runs as a child process and talks to a node started in this
// process on a real PostgreSQL.
#define BOOST_TEST_MODULE cli
#include <boost/test/unit_test.hpp>

#include "tests/support/certificates.hpp"
#include "tests/support/nodes.hpp"
#include "tools/http_fetch.hpp"
#include "tools/node_process.hpp"

#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

extern char** environ;

using namespace taskmill;
using namespace std::chrono_literals;
using nlohmann::json;

namespace {

/// What one run of the binary left behind.
struct run_result {
  std::vector<std::string> args;
  int exit_code = -1;
  std::string out;
  std::string err;
};

std::ostream& operator<<(std::ostream& os, const run_result& r) {
  os << "taskmill";
  for (const auto& a : r.args) os << " '" << a << "'";
  return os << "\nexit code " << r.exit_code << "\nstdout:\n" << r.out << "stderr:\n" << r.err;
}

std::string read_all(FILE* file) {
  std::rewind(file);
  std::string text;
  char buffer[4096];
  while (auto n = std::fread(buffer, 1, sizeof buffer, file)) text.append(buffer, n);
  return text;
}

/// This process's environment without TASKMILL_API_TOKEN, plus `extra`.
std::vector<std::string> child_environment(const std::vector<std::string>& extra) {
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e)
    if (std::string_view{*e}.rfind("TASKMILL_API_TOKEN=", 0) != 0) env.emplace_back(*e);
  env.insert(env.end(), extra.begin(), extra.end());
  return env;
}

std::vector<char*> c_strings(std::vector<std::string>& texts) {
  std::vector<char*> out;
  for (auto& t : texts) out.push_back(t.data());
  out.push_back(nullptr);
  return out;
}

/// The exit code, or a failed test if the child runs longer than `timeout`.
int wait_for_exit(pid_t pid, std::chrono::seconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  int status = 0;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      BOOST_FAIL("taskmill ran longer than " << timeout.count() << " s");
    }
    std::this_thread::sleep_for(10ms);
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/// Runs the taskmill binary with `args` and the environment plus `env`.
run_result run_binary(std::vector<std::string> args, const std::vector<std::string>& env = {}) {
  const char* binary = std::getenv("TASKMILL_BINARY");
  BOOST_REQUIRE_MESSAGE(binary, "TASKMILL_BINARY is not set: run the tests through ctest");
  std::unique_ptr<FILE, int (*)(FILE*)> out{std::tmpfile(), &std::fclose};
  std::unique_ptr<FILE, int (*)(FILE*)> err{std::tmpfile(), &std::fclose};
  BOOST_REQUIRE(out && err);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, fileno(out.get()), 1);
  posix_spawn_file_actions_adddup2(&actions, fileno(err.get()), 2);
  std::vector<std::string> argv_texts{binary};
  argv_texts.insert(argv_texts.end(), args.begin(), args.end());
  auto env_texts = child_environment(env);
  auto argv = c_strings(argv_texts);
  auto envp = c_strings(env_texts);
  pid_t pid = 0;
  int rc = posix_spawn(&pid, binary, &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  BOOST_REQUIRE_MESSAGE(rc == 0, "cannot start " << binary << ": " << std::strerror(rc));
  run_result r;
  r.exit_code = wait_for_exit(pid, 60s);
  r.args = std::move(args);
  r.out = read_all(out.get());
  r.err = read_all(err.get());
  return r;
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in{text};
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

/// A "name:   value" listing as a map.
std::map<std::string, std::string> listing(const std::string& text) {
  std::map<std::string, std::string> fields;
  for (const auto& line : lines_of(text)) {
    auto colon = line.find(": ");
    if (colon == std::string::npos) continue;
    auto value = line.find_first_not_of(' ', colon + 1);
    fields[line.substr(0, colon)] = value == std::string::npos ? "" : line.substr(value);
  }
  return fields;
}

config node_config() {
  return test::test_node_config("cli-node");
}

struct cli_fixture : test::nodes_fixture {
  cli_fixture() : nodes_fixture("cli") {}

  std::string server;

  void start(const config& cfg = node_config()) { server = api_url(nodes_fixture::start(cfg)); }

  /// Runs taskmill against this node (unless `args` name a server).
  run_result run(std::vector<std::string> args, const std::vector<std::string>& env = {}) {
    if (std::find(args.begin(), args.end(), "--server") == args.end()) {
      args.push_back("--server");
      args.push_back(server);
    }
    return run_binary(std::move(args), env);
  }

  /// Runs with --json and requires exit code `expected_exit` and one JSON document.
  json run_json(std::vector<std::string> args, int expected_exit = 0) {
    args.push_back("--json");
    auto r = run(std::move(args));
    BOOST_REQUIRE_MESSAGE(r.exit_code == expected_exit, r);
    auto doc = json::parse(r.out, nullptr, false);
    BOOST_REQUIRE_MESSAGE(!doc.is_discarded(), "not JSON: " << r);
    return doc;
  }

  int64_t submit(std::vector<std::string> args) {
    args.insert(args.begin(), "submit");
    return run_json(std::move(args))["task"]["id"].get<int64_t>();
  }
};

}  // namespace

// Evaluates `result` once, and shows it whole when its exit code is not `code`.
#define CHECK_RUN(result, code)                                \
  do {                                                         \
    const run_result& checked = (result);                      \
    BOOST_CHECK_MESSAGE(checked.exit_code == (code), checked); \
  } while (false)

BOOST_FIXTURE_TEST_SUITE(against_a_node, cli_fixture)

BOOST_AUTO_TEST_CASE(submit_show_and_list) {
  start();
  auto created = run(
      {"submit", "NOOP", "a b&c/d", "--payload", R"({"n": 1})", "--priority", "2", "--in", "1h"});
  CHECK_RUN(created, 0);
  auto fields = listing(created.out);
  BOOST_CHECK_EQUAL(fields["outcome"], "created");
  BOOST_CHECK_EQUAL(fields["key"], "a b&c/d");
  BOOST_CHECK_EQUAL(fields["status"], "pending");
  BOOST_CHECK_EQUAL(fields["priority"], "2");
  BOOST_CHECK_EQUAL(fields["payload"], R"({"n":1})");

  auto other = run_json({"submit", "NOOP", "other", "--in", "1h", "--version", "3"});
  BOOST_CHECK_EQUAL(other["outcome"], "created");
  BOOST_CHECK_EQUAL(other["task"]["version"], 3);
  auto id = other["task"]["id"].get<int64_t>();
  auto again = run_json({"submit", "NOOP", "other", "--in", "2h", "--version", "3"});
  BOOST_CHECK_EQUAL(again["outcome"], "replaced");
  BOOST_CHECK_EQUAL(again["task"]["id"], id);
  auto older = run({"submit", "NOOP", "other", "--version", "2"});
  CHECK_RUN(older, 0);
  BOOST_CHECK_EQUAL(listing(older.out)["outcome"], "stale");

  auto shown = run({"show", std::to_string(id)});
  CHECK_RUN(shown, 0);
  BOOST_CHECK_EQUAL(listing(shown.out)["id"], std::to_string(id));
  BOOST_CHECK_EQUAL(listing(shown.out)["key"], "other");
  BOOST_CHECK_EQUAL(listing(shown.out)["batch"], "-");
  // Due in two hours: it says why it is not running.
  BOOST_CHECK_EQUAL(listing(shown.out)["waiting"], "due_later");
  BOOST_CHECK(contains(listing(shown.out)["why"], "due later, at "));

  auto table = run({"list", "--type", "NOOP"});
  CHECK_RUN(table, 0);
  auto rows = lines_of(table.out);
  BOOST_REQUIRE_EQUAL(rows.size(), 3u);
  BOOST_CHECK_EQUAL(rows[0].rfind("ID", 0), 0u);
  BOOST_CHECK(contains(table.out, "a b&c/d"));
  // Columns line up: every row has its status where the header has STATUS.
  auto status_column = rows[0].find("STATUS");
  for (size_t i = 1; i < rows.size(); ++i)
    BOOST_CHECK_EQUAL(rows[i].substr(status_column, 7), "pending");

  auto by_key = run_json({"list", "--key", "a b&c/d"});
  BOOST_REQUIRE_EQUAL(by_key["tasks"].size(), 1u);
  BOOST_CHECK_EQUAL(by_key["tasks"][0]["key"], "a b&c/d");

  auto first_page = run({"list", "--limit", "1"});
  CHECK_RUN(first_page, 0);
  BOOST_CHECK_EQUAL(lines_of(first_page.out).size(), 2u);
  BOOST_CHECK(contains(first_page.err, "--all"));
  auto every_page = run_json({"list", "--limit", "1", "--all"});
  BOOST_REQUIRE_EQUAL(every_page["tasks"].size(), 2u);
  BOOST_CHECK_EQUAL(every_page["tasks"][0]["key"], "other");  // newest first
  BOOST_CHECK(every_page["next_page_token"].is_null());

  auto bad_status = run({"list", "--status", "asleep"});
  CHECK_RUN(bad_status, 1);
  BOOST_CHECK(contains(bad_status.err, "error: status must be one of pending"));
}

BOOST_AUTO_TEST_CASE(submit_wait_follows_the_task_to_its_end) {
  start();
  auto ok = run({"submit", "NOOP", "w", "--wait"});
  CHECK_RUN(ok, 0);
  BOOST_CHECK(contains(ok.err, "(NOOP w): created"));
  BOOST_CHECK(contains(ok.err, ": succeeded, attempt 1"));
  BOOST_CHECK_EQUAL(listing(ok.out)["status"], "succeeded");

  auto failing = run({"submit", "FAIL", "f", "--wait"});
  CHECK_RUN(failing, 1);
  BOOST_CHECK(contains(failing.err, ": dead, attempt 1: the fail executor fails every task"));
  BOOST_CHECK_EQUAL(listing(failing.out)["status"], "dead");

  // Each attempt sleeps past its timeout: the first is retried, the second is the last.
  auto timing_out = run({"submit", "SLEEP", "t", "--payload", "5000", "--timeout-ms", "1000",
                         "--max-retries", "1", "--wait"});
  CHECK_RUN(timing_out, 1);
  BOOST_CHECK(contains(timing_out.err, ": running, attempt 1"));
  BOOST_CHECK(contains(timing_out.err, ": dead, attempt 2: timed out"));

  auto as_json = run_json({"submit", "NOOP", "j", "--wait"});
  BOOST_CHECK_EQUAL(as_json["status"], "succeeded");
  BOOST_CHECK_EQUAL(as_json["key"], "j");
}

BOOST_AUTO_TEST_CASE(reschedule_moves_a_task) {
  start();
  submit({"NOOP", "later", "--in", "1h"});
  auto moved = run({"reschedule", "NOOP", "later", "--execute-at", "2030-01-01T00:00:00Z"});
  CHECK_RUN(moved, 0);
  BOOST_CHECK_EQUAL(listing(moved.out)["outcome"], "updated");
  BOOST_CHECK_EQUAL(listing(moved.out)["execute_at"], "2030-01-01T00:00:00Z");

  auto with_payload =
      run_json({"reschedule", "NOOP", "later", "--in", "2h", "--payload", R"({"x": 2})"});
  BOOST_CHECK_EQUAL(with_payload["outcome"], "updated");
  BOOST_CHECK_EQUAL(with_payload["task"]["payload"]["x"], 2);

  auto no_time = run({"reschedule", "NOOP", "later"});
  CHECK_RUN(no_time, 2);
  BOOST_CHECK(contains(no_time.err, "--execute-at"));
  auto bad_time = run({"reschedule", "NOOP", "later", "--execute-at", "tomorrow"});
  CHECK_RUN(bad_time, 1);
  BOOST_CHECK_EQUAL(bad_time.err,
                    "error: execute_at must be an RFC 3339 time such as 2026-11-21T22:52:00Z\n");
}

BOOST_AUTO_TEST_CASE(cancel_by_id_and_by_type_and_key) {
  start();
  auto id = submit({"NOOP", "c1", "--in", "1h"});
  submit({"NOOP", "c2", "--in", "1h"});
  auto by_id = run({"cancel", std::to_string(id)});
  CHECK_RUN(by_id, 0);
  BOOST_CHECK_EQUAL(listing(by_id.out)["outcome"], "cancelled");
  BOOST_CHECK_EQUAL(listing(by_id.out)["status"], "cancelled");
  BOOST_CHECK_EQUAL(listing(by_id.out)["key"], "c1");

  auto by_key = run_json({"cancel", "NOOP", "c2"});
  BOOST_CHECK_EQUAL(by_key["outcome"], "cancelled");
  BOOST_CHECK_EQUAL(by_key["task"]["key"], "c2");
  BOOST_CHECK_EQUAL(run_json({"cancel", "NOOP", "c2"})["outcome"], "unchanged");

  auto not_an_id = run({"cancel", "c1"});
  CHECK_RUN(not_an_id, 2);
  BOOST_CHECK(contains(not_an_id.err, "'c1' is not a task id"));
  CHECK_RUN(run({"cancel", "NOOP", "c1", "extra"}), 2);
  auto unknown = run({"cancel", "NOOP", "nobody"});
  CHECK_RUN(unknown, 1);
  BOOST_CHECK_EQUAL(unknown.err, "error: no task with type NOOP and key nobody\n");
}

BOOST_AUTO_TEST_CASE(attempts_and_retry) {
  start();
  auto dead = run_json({"submit", "FAIL", "r", "--max-retries", "0", "--wait"}, 1);
  BOOST_REQUIRE_EQUAL(dead["status"], "dead");
  auto id = std::to_string(dead["id"].get<int64_t>());

  auto attempts = run({"attempts", id});
  CHECK_RUN(attempts, 0);
  auto rows = lines_of(attempts.out);
  BOOST_REQUIRE_EQUAL(rows.size(), 2u);
  BOOST_CHECK_EQUAL(rows[0].rfind("ATTEMPT", 0), 0u);
  BOOST_CHECK_EQUAL(rows[1].rfind("1 ", 0), 0u);
  BOOST_CHECK(contains(rows[1], "cli-node"));
  BOOST_CHECK(contains(rows[1], "the fail executor fails every task"));

  auto retried = run({"retry", id});
  CHECK_RUN(retried, 0);
  BOOST_CHECK_EQUAL(listing(retried.out)["id"], id);
  BOOST_CHECK_EQUAL(listing(retried.out)["retry_count"], "0");
  BOOST_CHECK(test::eventually([&] {
    return run_json({"attempts", id})["attempts"].size() == 2 &&
           run_json({"show", id})["status"] == "dead";
  }));
  CHECK_RUN(run({"retry", "999999"}), 1);
}

// `taskmill logs ID --follow` shows the lines as they come and ends once the
// task finished; without --follow, what is there.
BOOST_AUTO_TEST_CASE(logs_follow_a_running_task_to_its_end) {
  start();
  auto id = std::to_string(submit({"SLEEP", "long", "--payload", R"({"ms": 2500})"}));
  BOOST_REQUIRE(test::eventually([&] { return run_json({"show", id})["status"] == "running"; }));
  auto log = [&](const std::string& line) {
    auto res = http_fetch("POST", server + "/v1/tasks/" + id + "/logs",
                          json{{"attempt", 1}, {"lines", {line}}}.dump());
    BOOST_CHECK(res && res->status == 200 && contains(res->body, "true"));
  };
  log("first");
  run_result followed;
  std::thread follower{[&] { followed = run({"logs", id, "--follow"}); }};
  std::this_thread::sleep_for(700ms);
  log("second");
  follower.join();
  CHECK_RUN(followed, 0);
  auto rows = lines_of(followed.out);
  BOOST_REQUIRE_EQUAL(rows.size(), 2u);
  BOOST_CHECK(contains(rows[0], "attempt 1  first"));
  BOOST_CHECK(contains(rows[1], "attempt 1  second"));
  BOOST_CHECK_EQUAL(run_json({"show", id})["status"], "succeeded");
  auto once = run({"logs", id, "--json"});
  CHECK_RUN(once, 0);
  BOOST_CHECK_EQUAL(json::parse(lines_of(once.out)[1])["line"], "second");
  auto unknown = run({"logs", "999999"});
  CHECK_RUN(unknown, 1);
  BOOST_CHECK_EQUAL(unknown.err, "error: no task with id 999999\n");
}

BOOST_AUTO_TEST_CASE(batch_counts_and_retry_failed) {
  start();
  const std::string batch = "nightly/1 a";
  CHECK_RUN(run({"submit", "NOOP", "b1", "--batch", batch, "--wait"}), 0);
  CHECK_RUN(run({"submit", "NOOP", "b2", "--batch", batch, "--wait"}), 0);
  CHECK_RUN(run({"submit", "FAIL", "b3", "--batch", batch, "--max-retries", "0", "--wait"}), 1);

  auto counts = run({"batch", batch});
  CHECK_RUN(counts, 0);
  auto fields = listing(counts.out);
  BOOST_CHECK_EQUAL(fields["batch"], batch);
  BOOST_CHECK_EQUAL(fields["succeeded"], "2");
  BOOST_CHECK_EQUAL(fields["dead"], "1");
  BOOST_CHECK_EQUAL(fields["total"], "3");
  auto doc = run_json({"batch", batch});
  BOOST_CHECK_EQUAL(doc["counts"]["succeeded"], 2);
  BOOST_CHECK_EQUAL(doc["total"], 3);

  auto retried = run({"batch", batch, "--retry-failed"});
  CHECK_RUN(retried, 0);
  BOOST_CHECK_EQUAL(retried.out, "retried: 1\n");
  json rerun;
  bool ran_again = test::eventually([&] {
    rerun = run_json({"list", "--batch", batch, "--type", "FAIL"});
    return rerun["tasks"][0]["attempt"] == 2 && rerun["tasks"][0]["status"] == "dead";
  });
  BOOST_CHECK_MESSAGE(ran_again, "the failed task did not run again: " << rerun.dump());

  auto missing = run({"batch", "nosuch"});
  CHECK_RUN(missing, 1);
  BOOST_CHECK_EQUAL(missing.err, "error: no batch nosuch\n");
}

// A page of the API reads a bounded stretch of the table; `list` follows
// the short pages of a rare type until its own page is full.
BOOST_AUTO_TEST_CASE(list_fills_its_page_from_short_pages_of_a_rare_type) {
  start();
  db.exec(
      "INSERT INTO taskmill.tasks (type, key, status, priority, execute_at, trace_id, max_retries, "
      "timeout_ms, backoff_kind, backoff_base_ms, backoff_cap_ms, backoff_jitter) SELECT CASE WHEN "
      "g % 40000 = 1 THEN 'RARE' ELSE 'BULK' END, 'b' || g, 'succeeded', 3, now(), 't', 3, 5000, "
      "'fixed', 1000, 1000, 0 FROM generate_series(1, 130000) g");
  auto two = run_json({"list", "--type", "RARE", "--limit", "2"});
  BOOST_CHECK_EQUAL(two["tasks"].size(), 2u);
  BOOST_CHECK(two["next_page_token"].is_string());
  auto every = run_json({"list", "--type", "RARE", "--all"});
  BOOST_CHECK_EQUAL(every["tasks"].size(), 4u);
  auto none = run({"list", "--type", "NO_SUCH_TYPE"});
  CHECK_RUN(none, 0);
  BOOST_CHECK_EQUAL(lines_of(none.out).size(), 1u);
}

BOOST_AUTO_TEST_CASE(jobs_put_list_show_next_trigger_firings_pause_delete) {
  start();
  auto put = run({"jobs", "put", "nightly", "--schedule", "0 30 2 * * *", "--time-zone",
                  "Europe/Berlin", "--type", "NOOP", "--payload", R"({"full": true})", "--misfire",
                  "skip", "--description", "count sign-ups"});
  CHECK_RUN(put, 0);
  BOOST_CHECK(put.out.rfind("created\n", 0) == 0);
  BOOST_CHECK_EQUAL(listing(put.out)["misfire"], "skip");
  auto list = run({"jobs", "list"});
  CHECK_RUN(list, 0);
  BOOST_CHECK_MESSAGE(list.out.find("nightly") != std::string::npos &&
                          list.out.find("Europe/Berlin") != std::string::npos,
                      list);
  BOOST_CHECK_EQUAL(listing(run({"jobs", "show", "nightly"}).out)["description"], "count sign-ups");
  auto next = run({"jobs", "next", "nightly", "--count", "3"});
  CHECK_RUN(next, 0);
  BOOST_CHECK_EQUAL(std::count(next.out.begin(), next.out.end(), '\n'), 3);
  auto fired = run_json({"jobs", "trigger", "nightly", "--payload", R"({"by": "hand"})"});
  BOOST_CHECK_EQUAL(fired["outcome"], "fired");
  BOOST_CHECK(test::eventually([&] {
    auto firings = run_json({"jobs", "firings", "nightly"});
    return firings["firings"][0]["counts"]["succeeded"] == 1;
  }));
  auto table = run({"jobs", "firings", "nightly"});
  BOOST_CHECK_MESSAGE(table.out.find("manual") != std::string::npos &&
                          table.out.find("succeeded=1") != std::string::npos,
                      table);
  // A job with a child job and an on_finish: the child's firing says whose
  // child it is.
  CHECK_RUN(run({"jobs", "put", "digest", "--schedule", "@yearly", "--type", "NOOP"}), 0);
  auto chained = run({"jobs", "put", "hourly", "--schedule", "@yearly", "--type", "NOOP",
                      "--child-job", "digest", "--on-finish", R"({"type": "NOOP"})"});
  CHECK_RUN(chained, 0);
  BOOST_CHECK_EQUAL(listing(chained.out)["child_jobs"], R"(["digest"])");
  BOOST_CHECK_EQUAL(run_json({"jobs", "trigger", "hourly"})["outcome"], "fired");
  BOOST_CHECK(test::eventually([&] {
    return run({"jobs", "firings", "digest"}).out.find("child of hourly") != std::string::npos;
  }));
  auto cycle = run({"jobs", "put", "digest", "--schedule", "@yearly", "--type", "NOOP",
                    "--child-job-on-failure", "hourly"});
  CHECK_RUN(cycle, 1);
  BOOST_CHECK_MESSAGE(
      cycle.err.find("child_jobs: a cycle: digest -> hourly -> digest") != std::string::npos,
      cycle);
  BOOST_CHECK_EQUAL(listing(run({"jobs", "pause", "nightly"}).out)["enabled"], "false");
  BOOST_CHECK_EQUAL(listing(run({"jobs", "resume", "nightly"}).out)["enabled"], "true");
  auto bad = run({"jobs", "put", "x", "--schedule", "61 * * * *", "--type", "NOOP"});
  CHECK_RUN(bad, 1);
  BOOST_CHECK_MESSAGE(bad.err.find("\"61\" in the minute field") != std::string::npos, bad);
  CHECK_RUN(run({"jobs", "delete", "nightly"}), 0);
  auto gone = run({"jobs", "show", "nightly"});
  CHECK_RUN(gone, 1);
  BOOST_CHECK_EQUAL(gone.err, "error: no job nightly\n");
}

BOOST_AUTO_TEST_CASE(keys_put_list_show_key_delete) {
  start();
  CHECK_RUN(run({"keys", "put", "tenants", "--limit", "2", "--key-limit", "acme=5", "--rate", "10",
                 "--period-ms", "60000"}),
            0);
  auto listed = run({"keys", "list"});
  CHECK_RUN(listed, 0);
  BOOST_CHECK_MESSAGE(contains(listed.out, "tenants"), listed);
  auto space = run_json({"keys", "show", "tenants", "--top", "3"});
  BOOST_CHECK_EQUAL(space["keys"]["acme"], 5);
  BOOST_CHECK_EQUAL(space["rate"], 10);
  BOOST_CHECK(space["top_running"].is_array());
  auto shown = run({"keys", "show", "tenants"});
  CHECK_RUN(shown, 0);
  BOOST_CHECK_MESSAGE(contains(shown.out, "running most:"), shown);
  auto key = run_json({"keys", "key", "tenants", "acme"});
  BOOST_CHECK_EQUAL(key["limit"], 5);
  BOOST_CHECK_EQUAL(key["limit_from"], "key");
  BOOST_CHECK_EQUAL(key["rate_used"], 0);
  auto bad = run({"keys", "put", "tenants", "--limit", "0"});
  CHECK_RUN(bad, 1);
  BOOST_CHECK_MESSAGE(contains(bad.err, "key_spaces.tenants.limit must be a whole number"), bad);
  auto malformed = run({"keys", "put", "tenants", "--limit", "1", "--key-limit", "acme"});
  BOOST_CHECK_NE(malformed.exit_code, 0);
  BOOST_CHECK_MESSAGE(contains(malformed.err, "NAME=N"), malformed);
  BOOST_CHECK_EQUAL(run_json({"keys", "show", "tenants"})["limit"], 2);
  CHECK_RUN(run({"keys", "delete", "tenants"}), 0);
  auto gone = run({"keys", "show", "tenants"});
  CHECK_RUN(gone, 1);
  BOOST_CHECK_MESSAGE(contains(gone.err, "no key space tenants"), gone);
}

BOOST_AUTO_TEST_CASE(stats_and_nodes) {
  auto cfg = node_config();
  // Peers are looked for every ten heartbeats.
  cfg.heartbeat.interval = 200ms;
  start(cfg);
  CHECK_RUN(run({"submit", "NOOP", "s", "--wait"}), 0);
  auto stats = run({"stats"});
  CHECK_RUN(stats, 0);
  auto rows = lines_of(stats.out);
  BOOST_REQUIRE_GE(rows.size(), 2u);
  BOOST_CHECK_EQUAL(rows[0].rfind("TYPE", 0), 0u);
  BOOST_CHECK(contains(rows[0], "SUCCEEDED"));
  BOOST_CHECK_EQUAL(rows[1].rfind("NOOP ", 0), 0u);
  BOOST_CHECK(contains(stats.out, "node:cli-node"));
  auto doc = run_json({"stats"});
  BOOST_CHECK_EQUAL(doc["counts"]["NOOP"]["succeeded"], 1);
  BOOST_CHECK(doc["limiter"].is_array());

  // A second node as the cluster would have registered it, at a loopback
  // port where nothing listens: this node tries to link to it, and fails.
  db.exec(
      "INSERT INTO taskmill.nodes (name, incarnation, address) "
      "VALUES ('peer-node', 'test', '127.0.0.1:1')");
  auto nodes = run({"nodes"});
  CHECK_RUN(nodes, 0);
  auto node_rows = lines_of(nodes.out);
  BOOST_REQUIRE_GE(node_rows.size(), 2u);
  BOOST_CHECK_EQUAL(node_rows[0].rfind("NAME", 0), 0u);
  auto peer = std::find_if(node_rows.begin(), node_rows.end(),
                           [](const std::string& row) { return row.rfind("peer-node ", 0) == 0; });
  BOOST_REQUIRE(peer != node_rows.end());
  BOOST_CHECK(contains(*peer, " 127.0.0.1:1 "));
  BOOST_CHECK(contains(*peer, " follower "));
  // The LINK column: this node's own row says self; the peer's link is
  // tried (a node looks for new rows every ten heartbeats while it has no
  // link down) and fails.
  BOOST_CHECK(std::any_of(node_rows.begin(), node_rows.end(),
                          [](const std::string& row) { return row.ends_with(" self"); }));
  BOOST_CHECK(test::eventually(
      [&] {
        // Alive, as far as the database can tell.
        db.exec("UPDATE taskmill.nodes SET heartbeat_at = now() WHERE name = 'peer-node'");
        auto again = lines_of(run({"nodes"}).out);
        return std::any_of(again.begin(), again.end(), [](const std::string& row) {
          return row.rfind("peer-node ", 0) == 0 && row.ends_with(" down");
        });
      },
      30s));
  auto listed = run_json({"nodes"});
  BOOST_CHECK(std::any_of(listed["nodes"].begin(), listed["nodes"].end(), [](const json& n) {
    return n["name"] == "peer-node" && n["address"] == "127.0.0.1:1";
  }));
}

BOOST_AUTO_TEST_CASE(alerts_lists_what_was_raised) {
  auto cfg = node_config();
  cfg.alerts.interval = 50ms;
  start(cfg);
  CHECK_RUN(run({"submit", "FAIL", "doomed", "--max-retries", "0", "--wait"}), 1);
  BOOST_REQUIRE(test::eventually([&] { return !run_json({"alerts"})["alerts"].empty(); }, 30s));
  auto alerts = run({"alerts"});
  CHECK_RUN(alerts, 0);
  auto rows = lines_of(alerts.out);
  BOOST_REQUIRE_EQUAL(rows.size(), 2u);
  BOOST_CHECK_EQUAL(rows[0].rfind("ID", 0), 0u);
  BOOST_CHECK(contains(rows[1], " dead_task "));
  BOOST_CHECK(contains(rows[1], "(FAIL doomed) is dead after attempt 1"));
  BOOST_CHECK(contains(rows[1], " -"));  // no webhooks
  auto doc = run_json({"alerts", "--since", "0", "--limit", "5"});
  BOOST_REQUIRE_EQUAL(doc["alerts"].size(), 1u);
  auto id = doc["alerts"][0]["id"].get<int64_t>();
  BOOST_CHECK(run_json({"alerts", "--since", std::to_string(id)})["alerts"].empty());
  auto bad = run({"alerts", "--since", "last tuesday"});
  CHECK_RUN(bad, 1);
  BOOST_CHECK_MESSAGE(contains(bad.err, "since must be an alert id or an RFC 3339 time"), bad);
}

// --after names parents by id or TYPE:KEY; the child waits for them, then runs.
BOOST_AUTO_TEST_CASE(submit_after_parents_by_id_and_by_type_and_key) {
  start();
  auto first = run_json({"submit", "NOOP", "first", "--wait"});
  auto held = run_json({"submit", "NOOP", "held:1", "--in", "1h"})["task"];
  auto child =
      run_json({"submit", "NOOP", "child", "--after", std::to_string(first["id"].get<int64_t>()),
                "--after", "NOOP:held:1", "--on-parent-failure", "run"})["task"];
  BOOST_CHECK(child["execute_at"].is_null());
  auto id = std::to_string(child["id"].get<int64_t>());
  BOOST_CHECK_EQUAL(db.scalar("SELECT string_agg(parent_id::text || ' ' || on_failure, ',' ORDER "
                              "BY parent_id) FROM taskmill.task_edges WHERE child_id = " +
                              id),
                    std::to_string(first["id"].get<int64_t>()) + " run," +
                        std::to_string(held["id"].get<int64_t>()) + " run");
  auto unknown = run({"submit", "NOOP", "orphan", "--after", "NOOP:nobody"});
  CHECK_RUN(unknown, 1);
  BOOST_CHECK_EQUAL(unknown.err, "error: after[0]: no task of type \"NOOP\" with key \"nobody\"\n");
  CHECK_RUN(run({"cancel", std::to_string(held["id"].get<int64_t>())}), 0);
  BOOST_CHECK(test::eventually([&] {
    return db.scalar("SELECT status FROM taskmill.tasks WHERE id = " + id) == "succeeded";
  }));
}

// A workflow from a file: shown with its steps, cancelled, retried and
// listed by id; a file the node refuses says why.
BOOST_AUTO_TEST_CASE(workflow_submit_show_cancel_retry_and_list) {
  start();
  auto dir = std::filesystem::temp_directory_path();
  auto file = (dir / ("taskmill-cli-workflow-" + std::to_string(getpid()) + ".json")).string();
  std::ofstream{file} << R"({"name": "nightly", "steps": [
    {"name": "first", "type": "NOOP"},
    {"name": "held", "type": "NOBODY_RUNS_THIS", "after": ["first"]},
    {"name": "last", "type": "NOOP", "after": [{"step": "held", "on_failure": "run"}]}]})";
  auto submitted = run({"workflow", "submit", file});
  CHECK_RUN(submitted, 0);
  BOOST_CHECK_MESSAGE(
      contains(submitted.out, "created\n") && contains(submitted.out, "name:          nightly"),
      submitted);
  auto id = std::to_string(
      run_json({"workflow", "list", "--limit", "1"})["workflows"][0]["id"].get<int64_t>());
  BOOST_REQUIRE(test::eventually([&] {
    return run_json({"workflow", "show", id})["steps"][0]["status"] == "succeeded";
  }));
  auto shown = run({"workflow", "show", id});
  CHECK_RUN(shown, 0);
  BOOST_CHECK_MESSAGE(contains(shown.out, "status:        running"), shown);
  BOOST_CHECK_MESSAGE(contains(shown.out, "last   pending    held(run)"), shown);
  auto cancelled = run({"workflow", "cancel", id});
  CHECK_RUN(cancelled, 0);
  BOOST_CHECK_EQUAL(cancelled.out, "cancelled 2 tasks\n");
  auto retried = run({"workflow", "retry", id});
  CHECK_RUN(retried, 0);
  BOOST_CHECK_EQUAL(retried.out, "retried 2 tasks\n");
  auto listed = run({"workflow", "list"});
  CHECK_RUN(listed, 0);
  BOOST_CHECK_MESSAGE(contains(listed.out, id + "   nightly  running"), listed);

  std::ofstream{file, std::ios::trunc} << R"({"name": "loop", "steps": [
    {"name": "a", "type": "NOOP", "after": ["a"]}]})";
  auto refused = run({"workflow", "submit", file});
  CHECK_RUN(refused, 1);
  BOOST_CHECK_EQUAL(refused.err, "error: steps[0].after: a cycle: a -> a\n");
  std::filesystem::remove(file);
  auto missing = run({"workflow", "submit", file});
  CHECK_RUN(missing, 1);
  BOOST_CHECK_EQUAL(missing.err, "error: cannot read " + file + "\n");
}

BOOST_AUTO_TEST_CASE(errors_show_the_servers_message) {
  start();
  auto unknown = run({"show", "999999"});
  CHECK_RUN(unknown, 1);
  BOOST_CHECK_EQUAL(unknown.out, "");
  BOOST_CHECK_EQUAL(unknown.err, "error: no task with id 999999\n");
  auto bad_priority = run({"submit", "NOOP", "p", "--priority", "9"});
  CHECK_RUN(bad_priority, 1);
  BOOST_CHECK_EQUAL(bad_priority.err.rfind("error: priority must be", 0), 0u);
  BOOST_CHECK_EQUAL(db.scalar("SELECT count(*) FROM taskmill.tasks"), "0");
}

BOOST_AUTO_TEST_CASE(bad_arguments_exit_2_naming_the_argument) {
  start();
  auto expect_2 = [&](std::vector<std::string> args, const std::string& named) {
    auto r = run(std::move(args));
    CHECK_RUN(r, 2);
    BOOST_CHECK_MESSAGE(contains(r.err, named), "stderr does not name " << named << ": " << r);
  };
  expect_2({"show", "abc"}, "ID");
  expect_2({"show"}, "ID");
  expect_2({"submit", "NOOP"}, "KEY");
  expect_2({"submit", "NOOP", "k", "--in", "soon"}, "--in");
  expect_2({"submit", "NOOP", "k", "--payload", "{bad"}, "--payload");
  expect_2({"submit", "NOOP", "k", "--in", "5s", "--execute-at", "2030-01-01T00:00:00Z"}, "--in");
  expect_2({"submit", "NOOP", "k", "--priority", "high"}, "--priority");
  expect_2({"list", "--limit", "ten"}, "--limit");
  expect_2({"stats", "--server", "127.0.0.1:8480"}, "--server");
  expect_2({"frobnicate"}, "frobnicate");
  BOOST_CHECK_EQUAL(db.scalar("SELECT count(*) FROM taskmill.tasks"), "0");
}

BOOST_AUTO_TEST_CASE(an_unreachable_server_is_named) {
  auto port = std::to_string(free_loopback_port());
  auto r = run_binary({"stats", "--server", "http://127.0.0.1:" + port});
  CHECK_RUN(r, 1);
  BOOST_CHECK(contains(r.err, "error: cannot reach 127.0.0.1:" + port));
  BOOST_CHECK(contains(r.err, "http://127.0.0.1:" + port + "?"));
  BOOST_CHECK_EQUAL(r.out, "");
}

BOOST_AUTO_TEST_CASE(a_configured_token_is_required_and_sent) {
  auto cfg = node_config();
  cfg.api.token = "s3cret";
  start(cfg);
  auto without = run({"stats"});
  CHECK_RUN(without, 1);
  BOOST_CHECK_EQUAL(without.err, "error: a valid Authorization: Bearer token is required\n");
  CHECK_RUN(run({"stats"}, {"TASKMILL_API_TOKEN=wrong"}), 1);
  CHECK_RUN(run({"stats"}, {"TASKMILL_API_TOKEN=s3cret"}), 0);
  auto submitted = run({"submit", "NOOP", "t", "--wait"}, {"TASKMILL_API_TOKEN=s3cret"});
  CHECK_RUN(submitted, 0);
  BOOST_CHECK_EQUAL(listing(submitted.out)["status"], "succeeded");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(node_config)

namespace {

/// `text` in a file of its own, removed with it.
struct config_file {
  explicit config_file(const std::string& text)
      : path{std::filesystem::temp_directory_path() /
             ("taskmill-config-" + std::to_string(getpid()) + "-" + std::to_string(counter++) +
              ".toml")} {
    std::ofstream{path} << text;
  }
  ~config_file() { std::filesystem::remove(path); }
  std::filesystem::path path;
  static inline int counter = 0;
};

/// What a node start writes: type settings and jobs, and the migrations.
std::string stored_settings(const test::task_database& db) {
  return db.scalar(
      "SELECT concat_ws(' | ', (SELECT string_agg(type || ':' || max_retries, ',' ORDER BY type) "
      "FROM taskmill.task_types), (SELECT string_agg(name, ',' ORDER BY name) FROM "
      "taskmill.jobs), (SELECT max(version) FROM taskmill.schema_migrations))");
}

}  // namespace

// Every problem a start would refuse, each named, the database's included
// (types, jobs, reconciler queries, in a transaction rolled back): nothing
// stored changes; a sound config passes, and says what it checked.
BOOST_AUTO_TEST_CASE(check_config_names_every_problem_and_changes_nothing) {
  test::task_database db{"checkconfig"};
  auto before = stored_settings(db);
  config_file unreadable{R"(
[node]
log_level = "loud"
bogus = 1
[api]
listen = "nope"
)"};
  auto r = run_binary({"node", "--check-config", "--config", unreadable.path.string()});
  BOOST_CHECK_MESSAGE(r.exit_code == 1, r);
  for (auto problem : {"'node.log_level' must be one of", "unknown option 'node.bogus'",
                       "'api.listen' must be host:port"})
    BOOST_CHECK_MESSAGE(r.out.find(problem) != std::string::npos, problem << " in\n" << r);

  auto tls = test::make_certificates("check");
  config_file refused{R"(
[cluster]
tls_cert = ")" + tls.cert +
                      R"("
tls_key = ")" + tls.dir.string() +
                      R"(/ca.key"
tls_ca = "/etc/hostname"
[types.A]
executor = "noop"
max_retries = -5
[reconciler]
rules = [{ type = "A", query = "SELECT key FROM nowhere" }]
[[jobs]]
name = "j"
schedule = "* * * * *"
type = "A"
priority = 9
)"};
  r = run_binary(
      {"node", "--check-config", "--config", refused.path.string(), "--database", db.conninfo()});
  BOOST_CHECK_MESSAGE(r.exit_code == 1, r);
  for (auto problem :
       {"problem: cluster.tls_key: " + tls.dir.string() + "/ca.key is not the key of",
        std::string{"problem: cluster.tls_ca: /etc/hostname holds no PEM"},
        std::string{"problem: jobs: j: priority must be between 1 and 5"},
        std::string{"problem: [defaults] or [types.*]: task type \"A\": max_retries"},
        std::string{"problem: reconciler.rules[0] (A): PostgreSQL: relation "
                    "\"nowhere\" does not exist"},
        std::string{"5 problems"}})
    BOOST_CHECK_MESSAGE(r.out.find(problem) != std::string::npos, problem << " in\n" << r);
  BOOST_CHECK_EQUAL(stored_settings(db), before);

  config_file sound{R"(
[cluster]
tls_cert = ")" + tls.cert +
                    R"("
tls_key = ")" + tls.key +
                    R"("
tls_ca = ")" + tls.ca +
                    R"("
[types.A]
executor = "noop"
max_retries = 7
[reconciler]
rules = [{ type = "A", query = "SELECT 'k' AS key, now() AS execute_at, '{}'::jsonb AS payload" }]
[[jobs]]
name = "j"
schedule = "* * * * *"
type = "A"
)"};
  r = run_binary(
      {"node", "--check-config", "--config", sound.path.string(), "--database", db.conninfo()});
  BOOST_CHECK_MESSAGE(r.exit_code == 0, r);
  BOOST_CHECK_MESSAGE(r.out.find(": OK (node ") != std::string::npos, r);
  BOOST_CHECK_MESSAGE(r.out.find("in a transaction rolled back") != std::string::npos, r);
  BOOST_CHECK_EQUAL(stored_settings(db), before);

  // A schema behind this build's (nodes of the release before run on it) is
  // checked as it is, said so, and left behind: a start migrates it.
  auto generation = db.scalar("SELECT max(generation) FROM taskmill.schema_definitions");
  db.exec("UPDATE taskmill.schema_definitions SET generation = generation - 1");
  r = run_binary(
      {"node", "--check-config", "--config", sound.path.string(), "--database", db.conninfo()});
  BOOST_CHECK_MESSAGE(r.exit_code == 0, r);
  BOOST_CHECK_MESSAGE(
      contains(r.out, "note: database: its schema is behind this build's") &&
          contains(r.out, "definitions generation " + std::to_string(std::stoi(generation) - 1) +
                              " of " + generation),
      r);
  BOOST_CHECK_EQUAL(db.scalar("SELECT max(generation) FROM taskmill.schema_definitions"),
                    std::to_string(std::stoi(generation) - 1));
  db.exec("UPDATE taskmill.schema_definitions SET generation = generation + 1");
  BOOST_CHECK_EQUAL(stored_settings(db), before);

  // Without a reachable database, what depends on it is said unchecked.
  r = run_binary({"node", "--check-config", "--config", sound.path.string(), "--database",
                  "host=127.0.0.1 port=1 dbname=none"});
  BOOST_CHECK_MESSAGE(r.exit_code == 0, r);
  BOOST_CHECK_MESSAGE(r.out.find("note: database: not reachable") != std::string::npos, r);
  std::filesystem::remove_all(tls.dir);
}

BOOST_AUTO_TEST_CASE(print_config_shows_every_option_as_used_secrets_masked) {
  config_file given{R"(
[database]
url = "postgresql://scheduler:hunter2@db.example/tasks"
statement_timeout = "45s"
[types.A]
executor = "noop"
[types.H]
executor = "http"
url = "http://robot:s3cret@hooks.example:8080/run"
[alerts]
webhooks = ["http://chat.example/services/T0/B0/XyZ"]
)"};
  auto r = run_binary(
      {"node", "--print-config", "--config", given.path.string(), "--set", "api.token=sesame"},
      {"TASKMILL_CLUSTER_SECRET=opensesame"});
  BOOST_CHECK_MESSAGE(r.exit_code == 0, r);
  for (auto shown : {"statement_timeout = '45s'", "lock_timeout = '2s'", "[types.A]",
                     "executor = 'noop'", "max_retries = 3", "token = '***'", "secret = '***'",
                     "url = 'postgresql://scheduler:***@db.example/tasks'", "[scheduling]",
                     "weights = [ 16, 8, 4, 2, 1 ]"})
    BOOST_CHECK_MESSAGE(r.out.find(shown) != std::string::npos, shown << " in\n" << r);
  for (auto shown : {"url = 'http://robot:***@hooks.example:8080/run'",
                     "webhooks = [ 'http://chat.example/***' ]"})
    BOOST_CHECK_MESSAGE(r.out.find(shown) != std::string::npos, shown << " in\n" << r);
  for (auto secret : {"hunter2", "sesame'", "opensesame", "s3cret", "XyZ"})
    BOOST_CHECK_MESSAGE(r.out.find(secret) == std::string::npos, secret << " shown in\n" << r);
  r = run_binary({"node", "--print-config", "--set", "scheduling.batch_size=0"});
  BOOST_CHECK_MESSAGE(r.exit_code == 2, r);
  BOOST_CHECK_MESSAGE(r.err.find("scheduling.batch_size") != std::string::npos, r);
}

// Every line a JSON object with the time, level, node, actor and message;
// a line about an attempt that failed names its task, attempt, type and the
// task's trace id.
BOOST_AUTO_TEST_CASE(a_node_told_to_logs_json_lines) {
  test::task_database db{"jsonlog"};
  const char* binary = std::getenv("TASKMILL_BINARY");
  BOOST_REQUIRE(binary);
  auto port = std::to_string(free_loopback_port());
  config_file file{R"(
[node]
log_format = "json"
log_level = "debug"
[types.F]
executor = "fail"
max_retries = 0
)"};
  node_process node{binary,
                    "json1",
                    db.conninfo(),
                    {"api.listen=127.0.0.1:" + port, "cluster.listen=127.0.0.1:0"},
                    file.path.string()};
  BOOST_REQUIRE(test::eventually([&] {
    return run_binary({"stats", "--server", "http://127.0.0.1:" + port}).exit_code == 0;
  }));
  const std::string trace = "4bf92f3577b34da6a3ce929d0e0e4736";
  auto id = db.scalar("SELECT (s.task).id FROM taskmill.submit('F', 'f1', trace_id => '" + trace +
                      "') s");
  BOOST_REQUIRE(test::eventually(
      [&] { return db.scalar("SELECT status FROM taskmill.tasks WHERE id = " + id) == "dead"; }));
  BOOST_CHECK_EQUAL(node.stop(), 0);
  std::ifstream in{node.log_file()};
  std::set<std::string> actors;
  int lines = 0;
  bool attempt_line = false;
  for (std::string line; std::getline(in, line); ++lines) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    BOOST_REQUIRE_MESSAGE(j.is_object(), "not JSON: " << line);
    BOOST_CHECK_EQUAL(j["node"], "json1");
    for (auto key : {"time", "level", "message"})
      BOOST_CHECK_MESSAGE(j.contains(key), key << " missing in " << line);
    if (j.contains("actor")) actors.insert(j["actor"]);
    if (j.value("task_id", int64_t{0}) == std::stoll(id)) {
      BOOST_TEST_MESSAGE(line);
      attempt_line =
          attempt_line || (j.value("trace_id", "") == trace && j.value("attempt", 0) == 1 &&
                           j.value("type", "") == "F" && j["level"] == "debug");
    }
  }
  BOOST_TEST_MESSAGE(lines << " lines from " << actors.size() << " actors");
  for (auto actor : {"node", "storage", "cluster"})
    BOOST_CHECK_MESSAGE(actors.count(actor), "no line of the " << actor);
  BOOST_CHECK_MESSAGE(attempt_line, "no debug line with task " << id << "'s trace id");
}

// A type's running limit raised by SIGHUP holds at once (three tasks run
// where one did), and so does the global limit, in stats and waiting reasons
// too; a job and an alert rule are taken, a listen address is named as
// needing a restart; a config refused changes nothing.
BOOST_AUTO_TEST_CASE(sighup_takes_what_a_running_node_can_and_names_the_rest) {
  test::task_database db{"sighup"};
  const char* binary = std::getenv("TASKMILL_BINARY");
  BOOST_REQUIRE(binary);
  auto server = "http://127.0.0.1:" + std::to_string(free_loopback_port());
  auto write = [](const std::filesystem::path& path, const std::string& text) {
    std::ofstream{path} << text;
  };
  const std::string sleepy = R"(
[types.S]
executor = "sleep"
timeout = "30s"
)";
  config_file file{sleepy + "running_limit = 1\n[scheduling]\nglobal_limit = 2\n"};
  node_process node{
      binary, "hup", db.conninfo(), {"api.listen=" + server.substr(7)}, file.path.string()};
  // The limits as the stats show them, scope: limit.
  auto limits = [&] {
    auto r = run_binary({"stats", "--json", "--server", server});
    auto doc = nlohmann::json::parse(r.out, nullptr, false);
    std::map<std::string, int64_t> shown;
    if (doc.is_object())
      for (const auto& l : doc.value("limiter", nlohmann::json::array()))
        shown[l.value("scope", "")] = l["limit"].is_number() ? l["limit"].get<int64_t>() : 0;
    return shown;
  };
  BOOST_REQUIRE(test::eventually([&] {
    return run_binary({"stats", "--server", server}).exit_code == 0;
  }));
  for (int i = 0; i < 4; ++i)
    BOOST_REQUIRE_EQUAL(run_binary({"submit", "S", "k" + std::to_string(i), "--payload", "15000",
                                    "--server", server})
                            .exit_code,
                        0);
  auto running = [&] {
    return std::stoi(db.scalar("SELECT count(*) FROM taskmill.tasks WHERE status = 'running'"));
  };
  BOOST_REQUIRE(test::eventually([&] { return running() == 1; }));
  std::this_thread::sleep_for(500ms);
  BOOST_CHECK_EQUAL(running(), 1);
  BOOST_CHECK_EQUAL(limits()["type:S"], 1);
  BOOST_CHECK_EQUAL(limits()["global"], 2);

  // The global limit of 3 binds now, not the type's.
  write(file.path, sleepy + R"(running_limit = 4
[scheduling]
global_limit = 3
[api]
token = "new"
[alerts]
failure_rate = 0.5
[[jobs]]
name = "j"
schedule = "0 3 * * *"
type = "S"
)");
  kill(node.pid(), SIGHUP);
  // The first task still sleeps: the others start beside it.
  BOOST_CHECK_MESSAGE(test::eventually([&] { return running() == 3; }, 3s),
                      running() << " running after the limit was raised\n"
                                << node.log_tail());
  auto log = [&] {
    std::ifstream in{node.log_file()};
    return std::string{std::istreambuf_iterator<char>{in}, {}};
  };
  // The reload logs what it did once it has done it all (the limits take
  // before the jobs are written).
  BOOST_CHECK_MESSAGE(
      test::eventually([&] { return contains(log(), "SIGHUP: a restart takes api.token"); }),
      log());
  BOOST_CHECK_MESSAGE(contains(log(),
                               "SIGHUP: took alerts.failure_rate, jobs[j], "
                               "scheduling.global_limit, types.S.running_limit"),
                      log());
  BOOST_CHECK_EQUAL(db.scalar("SELECT running_limit FROM taskmill.task_types WHERE type = 'S'"),
                    "4");
  BOOST_CHECK_EQUAL(db.scalar("SELECT string_agg(name, ',') FROM taskmill.jobs"), "j");
  BOOST_CHECK_EQUAL(limits()["type:S"], 4);
  BOOST_CHECK_EQUAL(limits()["global"], 3);
  auto waiting =
      db.scalar("SELECT id FROM taskmill.tasks WHERE status = 'pending' ORDER BY id LIMIT 1");
  auto why = run_binary({"show", waiting, "--json", "--server", server});
  BOOST_CHECK_MESSAGE(contains(why.out, "the global running limit is full: 3 of 3 running"), why);

  write(file.path, sleepy + "running_limit = 1\nbogus = 1\n");
  kill(node.pid(), SIGHUP);
  BOOST_CHECK(test::eventually([&] { return contains(log(), "the config is refused"); }));
  BOOST_CHECK_MESSAGE(contains(log(), "unknown option 'types.S.bogus'"), log());
  BOOST_CHECK_EQUAL(db.scalar("SELECT running_limit FROM taskmill.task_types WHERE type = 'S'"),
                    "4");
  BOOST_CHECK_EQUAL(node.stop(), 0);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(embedded)

namespace {

/// What a node's log says after `marker`, up to `end`.
std::string logged(const node_process& node, const std::string& marker, char end) {
  std::ifstream in{node.log_file()};
  for (std::string line; std::getline(in, line);) {
    auto at = line.find(marker);
    if (at == std::string::npos) continue;
    auto from = at + marker.size();
    return line.substr(from, line.find(end, from) - from);
  }
  return {};
}

/// True while `pid` runs (a zombie no longer does).
bool process_exists(pid_t pid) {
  if (kill(pid, 0) != 0 && errno == ESRCH) return false;
  std::ifstream stat{"/proc/" + std::to_string(pid) + "/stat"};
  std::string pid_text, command, state;
  return !(stat >> pid_text >> command >> state) || state != "Z";
}

}  // namespace

// The config checks syntax; the database owns the ranges. A type's timeout
// of 10 days, a duration the config takes, is refused as the node writes
// its settings: it stops, naming the type and the field, and nothing of
// them is stored. So is a job out of range, and every job and type setting
// of its config are checked before any is written.
BOOST_AUTO_TEST_CASE(settings_out_of_the_databases_ranges_stop_the_node_naming_them) {
  test::scratch_database db{"ranges"};
  auto node_with = [&](const std::string& setting) {
    return run_binary({"node", "--database", db.conninfo(), "--set", "api.listen=127.0.0.1:0",
                       "--set", "cluster.listen=127.0.0.1:0", "--set", "types.OK.timeout=1h",
                       "--set", setting});
  };
  auto r = node_with("types.X.timeout=10d");
  BOOST_CHECK_MESSAGE(r.exit_code != 0, r);
  BOOST_CHECK_MESSAGE(contains(r.err + r.out, R"(task type "X": timeout_ms must be between 1)"), r);
  r = node_with("types.X.max_retries=-1");
  BOOST_CHECK_MESSAGE(contains(r.err + r.out, R"(task type "X": max_retries must be between 0)"),
                      r);
  BOOST_CHECK_EQUAL(db.scalar("SELECT count(*) FROM taskmill.task_types WHERE type = 'OK'"), "0");
  auto types_before = db.scalar("SELECT count(*) FROM taskmill.task_types");
  auto job = (std::filesystem::temp_directory_path() /
              ("taskmill-job-" + std::to_string(getpid()) + ".toml"))
                 .string();
  std::ofstream{job} << "[[jobs]]\nname = \"fine\"\ntype = \"OK\"\nschedule = \"@daily\"\n"
                        "[[jobs]]\nname = \"j\"\ntype = \"OK\"\nschedule = \"@daily\"\n"
                        "catch_up_limit = 5000\n";
  r = run_binary({"node", "--database", db.conninfo(), "--config", job, "--set",
                  "api.listen=127.0.0.1:0", "--set", "cluster.listen=127.0.0.1:0"});
  BOOST_CHECK_MESSAGE(r.exit_code != 0, r);
  BOOST_CHECK_MESSAGE(contains(r.err + r.out, "jobs: j: catch_up_limit must be between 1 and 1000"),
                      r);
  BOOST_CHECK_EQUAL(db.scalar("SELECT count(*) FROM taskmill.jobs"), "0");
  BOOST_CHECK_EQUAL(db.scalar("SELECT count(*) FROM taskmill.task_types"), types_before);
  std::filesystem::remove(job);
}

BOOST_AUTO_TEST_CASE(a_node_without_a_database_runs_its_own_postgres_and_stops_it) {
  namespace fs = std::filesystem;
  auto dir = fs::temp_directory_path() / ("taskmill-embedded-" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  // The server runs as an unprivileged user when the tests run as root.
  fs::permissions(dir, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                           fs::perms::others_read | fs::perms::others_exec);
  const char* binary = std::getenv("TASKMILL_BINARY");
  BOOST_REQUIRE(binary);
  auto port = std::to_string(free_loopback_port());
  auto server = "http://127.0.0.1:" + port;
  // The first run creates the cluster, the second adopts it; one stops on
  // SIGTERM, the other on SIGINT.
  int run = 0;
  for (int stop_signal : {SIGTERM, SIGINT}) {
    auto key = "k" + std::to_string(++run);
    node_process node{binary,
                      "embedded",
                      "",
                      {"node.data_dir=" + dir.string(), "api.listen=127.0.0.1:" + port,
                       "cluster.listen=127.0.0.1:0", "types.DEMO.executor=noop"}};
    BOOST_REQUIRE_MESSAGE(test::eventually(
                              [&] {
                                return run_binary({"stats", "--server", server}).exit_code == 0;
                              },
                              90s),
                          test::later{[&](std::ostream& out) { out << node.log_tail(); }});
    auto submitted = run_binary({"submit", "DEMO", key, "--wait", "--server", server});
    BOOST_CHECK_MESSAGE(submitted.exit_code == 0 && contains(submitted.out, "succeeded"),
                        submitted);
    auto cluster = logged(node, "(data in ", ')');
    BOOST_REQUIRE_MESSAGE(!cluster.empty(), node.log_tail());
    std::ifstream pid_file{fs::path{cluster} / "pgdata" / "postmaster.pid"};
    pid_t postmaster = 0;
    BOOST_REQUIRE(pid_file >> postmaster);
    BOOST_REQUIRE(process_exists(postmaster));
    auto asked = std::chrono::steady_clock::now();
    BOOST_CHECK_EQUAL(node.stop(stop_signal, 30s), 0);
    auto took = std::chrono::duration<double>(std::chrono::steady_clock::now() - asked).count();
    BOOST_TEST_MESSAGE("stopped in " << took << " s on signal " << stop_signal);
    // pg_ctl returns once the lock file is gone, a moment before the process.
    BOOST_CHECK(test::eventually([&] { return !process_exists(postmaster); }, 5s));
    BOOST_CHECK(!fs::exists(fs::path{cluster} / "pgdata" / "postmaster.pid"));
  }
  fs::remove_all(dir);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(scenarios)

namespace {

std::string write_scenario(const std::string& name, const std::string& text) {
  auto path = std::filesystem::temp_directory_path() /
              ("taskmill-" + name + "-" + std::to_string(getpid()) + ".toml");
  std::ofstream{path} << text;
  return path.string();
}

/// A scenario on one node: an executor that answers 202 and posts the
/// result later, failing each task's first attempt; submits, an API
/// reschedule and cancel; then `checks`.
std::string api_scenario(const std::string& node, const std::string& checks) {
  return R"(name = "api steps"
[[executor]]
name = "later"
async = true
answers = [503]
latency_ms = [10, 50]
[[node]]
name = ")" +
         node +
         R"("
set = ["types.LATER.executor=http", "types.LATER.url={executor.later}",
       "types.LATER.backoff=fixed", "types.LATER.backoff_base=100ms"]
[[step]]
do = "start"
node = ")" +
         node +
         R"("
[[step]]
do = "submit"
count = 20
batch = 10
task = { type = "LATER", key = "k-{i}", execute_at = "+2s" }
[[step]]
do = "cancel"
count = 5
task = { type = "LATER", key = "k-{i}" }
[[step]]
do = "reschedule"
count = 5
task = { type = "LATER", key = "k-1{i}", execute_at = "+100ms" }
[[step]]
do = "wait"
timeout = "30s"
tasks = { type = "LATER", status = "succeeded", equals = 15 }
)" + checks;
}

/// A scenario that starts `node` and sleeps a minute: something to interrupt.
std::string start_and_sleep_scenario(const std::string& node) {
  return R"(name = "interrupted"
[[node]]
name = ")" +
         node + R"("
[[step]]
do = "start"
node = ")" +
         node + R"("
[[step]]
do = "sleep"
for = "60s"
)";
}

/// `taskmill scenario ARGS...` as a child process, its output to `out`.
pid_t spawn_scenario(const std::vector<std::string>& args, const std::string& out) {
  const char* binary = std::getenv("TASKMILL_BINARY");
  BOOST_REQUIRE(binary);
  std::vector<std::string> argv_texts{binary, "scenario"};
  argv_texts.insert(argv_texts.end(), args.begin(), args.end());
  auto env_texts = child_environment({});
  auto argv = c_strings(argv_texts);
  auto envp = c_strings(env_texts);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid = 0;
  auto rc = posix_spawn(&pid, binary, &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  BOOST_REQUIRE_EQUAL(rc, 0);
  return pid;
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_scenario_reports_as_json_and_exits_0_when_every_assertion_held) {
  test::scratch_database db{"scenariojson"};
  auto file = write_scenario("pass", api_scenario("s-pass", R"(
[[step]]
do = "assert"
tasks = { type = "LATER", status = "cancelled", equals = 5 }
no_duplicate_deliveries = true
every_task_ran = "LATER"
sql = "SELECT count(*) FROM taskmill.tasks WHERE attempt = 2 AND status = 'succeeded'"
equals = "15"
)"));
  auto r = run_binary({"scenario", "--json", "--database", db.conninfo(), file});
  BOOST_CHECK_MESSAGE(r.exit_code == 0, r);
  auto report = json::parse(r.out, nullptr, false);
  BOOST_REQUIRE_MESSAGE(report.is_array() && report.size() == 1, r);
  BOOST_CHECK(report[0]["passed"] == true);
  BOOST_CHECK_EQUAL(report[0]["assertions"].size(), 4u);
  for (const auto& a : report[0]["assertions"]) BOOST_CHECK_MESSAGE(a["held"] == true, a.dump());
  BOOST_CHECK_EQUAL(report[0]["steps"].size(), 6u);
  BOOST_CHECK(report[0]["logs"].is_null());
  // The progress went to stderr, step by step.
  BOOST_CHECK_MESSAGE(contains(r.err, "step 4 (line 23): reschedule 5 LATER k-1{i}"), r);
  std::filesystem::remove(file);
}

BOOST_AUTO_TEST_CASE(a_failed_assertion_exits_1_says_what_was_expected_and_keeps_the_logs) {
  test::scratch_database db{"scenariofail"};
  auto file = write_scenario("fail", api_scenario("s-fail", R"(
[[step]]
do = "assert"
tasks = { type = "LATER", status = "succeeded", equals = 16 }
)"));
  auto r = run_binary({"scenario", "--database", db.conninfo(), file});
  BOOST_CHECK_MESSAGE(r.exit_code == 1, r);
  BOOST_CHECK_MESSAGE(contains(r.out, "FAILED in") &&
                          contains(r.out, "tasks of LATER succeeded: expected = 16, found 15"),
                      r);
  auto at = r.out.find("logs of every process: ");
  BOOST_REQUIRE_MESSAGE(at != std::string::npos, r);
  auto logs = r.out.substr(at + 23, r.out.find('\n', at) - at - 23);
  BOOST_CHECK_MESSAGE(std::filesystem::exists(logs + "/s-fail.log"), logs);
  std::filesystem::remove_all(logs);
  std::filesystem::remove(file);
}

BOOST_AUTO_TEST_CASE(a_bad_file_exits_2_naming_the_line_and_the_key) {
  auto file =
      write_scenario("bad", "name = \"x\"\n[[step]]\ndo = \"sleep\"\nfor = \"1s\"\nfast = 1\n");
  auto r = run_binary({"scenario", file});
  BOOST_CHECK_EQUAL(r.exit_code, 2);
  BOOST_CHECK_MESSAGE(contains(r.err, ":5: step: fast is not a key of a 'sleep' step"), r);
  std::filesystem::remove(file);
}

// Every node and PostgreSQL step on the harness's own throwaway server, with
// an executor that fails a third of its calls: work goes on through a stop,
// a kill -9, restarts (plain and hard) and PostgreSQL stopped, crashed and
// started again, and nothing is delivered twice under one attempt.
BOOST_AUTO_TEST_CASE(node_and_postgres_steps_on_the_harnesss_own_server) {
  auto file = write_scenario("steps", R"(name = "every process step"
[[executor]]
name = "flaky"
failure_rate = 0.3
latency_ms = [1, 5]
[[node]]
name = "st1"
set = ["types.WORK.executor=http", "types.WORK.url={executor.flaky}", "types.WORK.max_retries=20",
       "types.WORK.backoff=fixed", "types.WORK.backoff_base=50ms",
       "heartbeat.interval=200ms", "heartbeat.missed=5", "watcher.interval=200ms"]
[[step]]
do = "start"
node = "st1"
[[step]]
do = "submit"
count = 40
task = { type = "WORK", key = "a-{i}" }
[[step]]
do = "wait"
timeout = "60s"
tasks = { type = "WORK", status = "succeeded", equals = 40 }
[[step]]
do = "stop"
node = "st1"
[[step]]
do = "start"
node = "st1"
[[step]]
do = "kill"
node = "st1"
[[step]]
do = "restart"
node = "st1"
[[step]]
do = "restart"
node = "st1"
hard = true
[[step]]
do = "postgres"
action = "stop"
[[step]]
do = "postgres"
action = "start"
[[step]]
do = "postgres"
action = "crash"
[[step]]
do = "postgres"
action = "start"
[[step]]
do = "submit"
count = 40
task = { type = "WORK", key = "b-{i}" }
[[step]]
do = "wait"
timeout = "90s"
tasks = { type = "WORK", status = "succeeded", equals = 80 }
[[step]]
do = "assert"
no_duplicate_deliveries = true
every_task_ran = "WORK"
sql = "SELECT count(*) > 0 FROM taskmill.attempts WHERE error IS NOT NULL"
equals = "t"
)");
  auto r = run_binary({"scenario", file});
  BOOST_CHECK_MESSAGE(r.exit_code == 0, r);
  for (const char* step :
       {"stop st1", "kill st1", "restart st1", "postgres stop", "postgres crash", "postgres start"})
    BOOST_CHECK_MESSAGE(contains(r.out, step), "no step '" << step << "' in " << r);
  std::filesystem::remove(file);
}

// Ctrl-C in the middle: every process the scenario started is stopped.
BOOST_AUTO_TEST_CASE(ctrl_c_stops_every_process_the_scenario_started) {
  test::scratch_database db{"scenarioint"};
  auto node = "s-int-" + std::to_string(getpid());
  auto file = write_scenario("int", start_and_sleep_scenario(node));
  auto pid = spawn_scenario({"--database", db.conninfo(), file}, "/dev/null");
  auto live = [&] {
    if (db.scalar("SELECT to_regclass('taskmill.nodes') IS NOT NULL") != "t") return false;
    return db.scalar("SELECT count(*) FROM taskmill.nodes WHERE name = $1 AND stopped_at IS NULL",
                     {node}) == "1";
  };
  BOOST_REQUIRE(test::eventually(live, 60s));
  kill(pid, SIGINT);
  BOOST_CHECK_EQUAL(wait_for_exit(pid, 60s), 130);
  // The node was stopped (it deregistered), not left running.
  BOOST_CHECK(!live());
  // (node[.]name: the pattern must not match the shell that runs pgrep.)
  BOOST_CHECK_NE(std::system(("pgrep -f 'node[.]name=" + node + "' > /dev/null").c_str()), 0);
  std::filesystem::remove(file);
}

// Ctrl-C with the harness's own PostgreSQL: the server goes too.
BOOST_AUTO_TEST_CASE(ctrl_c_stops_the_scenarios_own_postgresql_too) {
  auto node = "s-own-" + std::to_string(getpid());
  auto file = write_scenario("own", start_and_sleep_scenario(node));
  auto out = std::filesystem::temp_directory_path() /
             ("taskmill-own-" + std::to_string(getpid()) + ".out");
  auto pid = spawn_scenario({file}, out.string());
  auto printed = [&] {
    std::ifstream in{out};
    return std::string{std::istreambuf_iterator<char>{in}, {}};
  };
  BOOST_REQUIRE_MESSAGE(test::eventually([&] { return contains(printed(), "ok: running"); }, 60s),
                        test::later{[&](std::ostream& out) { out << printed(); }});
  // The scenario's own server, by its cluster: other tests start and stop
  // servers of their own meanwhile (postgre[s]: not the shell that asks).
  std::smatch cluster;
  auto said = printed();
  BOOST_REQUIRE(
      std::regex_search(said, cluster, std::regex{"its own PostgreSQL: .*cluster in (\\S+)"}));
  auto own_postmasters = [dir = cluster[1].str()] {
    int n = 0;
    if (FILE* p = popen(("pgrep -c -f 'bin/postgre[s] -D " + dir + "/'").c_str(), "r")) {
      if (std::fscanf(p, "%d", &n) != 1) n = 0;
      pclose(p);
    }
    return n;
  };
  BOOST_CHECK_EQUAL(own_postmasters(), 1);
  kill(pid, SIGINT);
  BOOST_CHECK_EQUAL(wait_for_exit(pid, 60s), 130);
  BOOST_CHECK_EQUAL(own_postmasters(), 0);
  BOOST_CHECK_NE(std::system(("pgrep -f 'node[.]name=" + node + "' > /dev/null").c_str()), 0);
  std::filesystem::remove(file);
  std::filesystem::remove(out);
}

BOOST_AUTO_TEST_SUITE_END()
