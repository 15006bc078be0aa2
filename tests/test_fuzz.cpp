// Fuzzing every decoder and parser with random and mutated inputs (SPEC §9):
// whatever comes in, nothing throws or crashes, errors are invalid_argument
// (or payload_too_large) in valid UTF-8 naming the field, and over HTTP no
// answer is a 5xx and a refused request changes nothing stored.
//
// The suite runs a fixed seed, so that it is the same in every CI run;
// TASKMILL_FUZZ_SEED=random draws a new one (printed at the start and in
// every failure) and TASKMILL_FUZZ_SEED=N replays it.
#define BOOST_TEST_MODULE fuzz
#include <boost/test/unit_test.hpp>

#include "config/config.hpp"
#include "messages/errors.hpp"
#include "messages/json_codec.hpp"
#include "messages/schedule.hpp"
#include "messages/text.hpp"
#include "messages/time.hpp"
#include "messages/validate.hpp"
#include "tests/support/nodes.hpp"
#include "tests/support/raw_http.hpp"

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>

using namespace taskmill;
using namespace std::chrono_literals;

namespace {

uint64_t run_seed() {
  static const uint64_t seed = [] {
    const char* chosen = std::getenv("TASKMILL_FUZZ_SEED");
    if (!chosen) return uint64_t{20261123};
    if (std::string{chosen} == "random")
      return static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
    return static_cast<uint64_t>(std::stoull(chosen));
  }();
  return seed;
}

/// Inputs that look like what a parser expects, broken in many small ways.
class fuzzer {
 public:
  explicit fuzzer(uint64_t salt) : rng_(run_seed() ^ salt) {}

  size_t below(size_t n) {
    return n == 0 ? 0 : std::uniform_int_distribution<size_t>{0, n - 1}(rng_);
  }

  std::string bytes(size_t max_length) {
    std::string out(below(max_length + 1), '\0');
    for (auto& c : out) c = static_cast<char>(below(256));
    return out;
  }

  /// A mutation of one of `seeds`, or now and then plain random bytes.
  std::string input(const std::vector<std::string>& seeds, size_t max_random = 64) {
    if (below(20) == 0) return bytes(max_random);
    auto s = seeds[below(seeds.size())];
    for (size_t n = 1 + below(4); n > 0; --n) mutate(s);
    return s;
  }

 private:
  void mutate(std::string& s) {
    static const std::vector<std::string> tokens = {"\\u0000",
                                                    "\xff",
                                                    "\xc3\x28",
                                                    "\xed\xa0\x80",
                                                    "1e400",
                                                    "-1e400",
                                                    "99999999999999999999999",
                                                    "-0",
                                                    "0.5",
                                                    "{",
                                                    "}",
                                                    "[",
                                                    "]",
                                                    "\"",
                                                    ":",
                                                    ",",
                                                    "null",
                                                    "true",
                                                    "\"\\ud800\"",
                                                    std::string(200, '['),
                                                    std::string(100, '{') + "\"a\":",
                                                    "\"priority\"",
                                                    "\"tasks\"",
                                                    "\"payload\"",
                                                    "\"execute_at\"",
                                                    "\"9999-12-31T23:59:59Z\"",
                                                    "\r\n",
                                                    "%ff",
                                                    "%00",
                                                    "Content-Length: 99999999999\r\n",
                                                    "Transfer-Encoding: chunked\r\n",
                                                    " ",
                                                    "\t"};
    auto at = below(s.size() + 1);
    switch (below(7)) {
      case 0:
        if (!s.empty()) s[below(s.size())] ^= static_cast<char>(1 << below(8));
        break;
      case 1:
        s.insert(at, 1, static_cast<char>(below(256)));
        break;
      case 2:
        s.insert(at, tokens[below(tokens.size())]);
        break;
      case 3:
        s.erase(at, below(16));
        break;
      case 4:
        if (at < s.size()) s.insert(at, s.substr(at, below(32)));
        break;
      case 5:
        s.resize(below(s.size() + 1));
        break;
      default:
        if (!s.empty()) s[below(s.size())] = "0123456789-+.eE\"{}[]:,"[below(22)];
    }
  }

  std::mt19937_64 rng_;
};

/// Words of which an error message must name at least one: the field, or
/// the part of the request that is wrong.
const std::vector<std::string> field_words = {"type",        "key",
                                              "version",     "payload",
                                              "execute_at",  "priority",
                                              "max_retries", "timeout_ms",
                                              "backoff",     "batch",
                                              "trace_id",    "shard",
                                              "tasks",       "id",
                                              "attempt",     "outcome",
                                              "result",      "error",
                                              "the body",    "unknown field",
                                              "path",        "query parameter",
                                              "header",      "limit",
                                              "status",      "page_token",
                                              "request",     "endpoint",
                                              "allowed",     "larger than",
                                              "longer than", "the executor's answer",
                                              "schedule",    "time_zone",
                                              "name",        "routing",
                                              "overlap",     "misfire",
                                              "catch_up",    "enabled",
                                              "shards",      "description",
                                              "count",       "no job"};

/// Checks the error properties; answers a description of what is wrong, or
/// empty. A message may also name a field by a name the input made up.
std::string bad_error(const caf::error& err, const std::string& input) {
  if (!is(err, errc::invalid_argument) && !is(err, errc::payload_too_large))
    return "not an input error: " + error_message(err);
  auto message = error_message(err);
  if (message.empty()) return "an empty message";
  if (!is_utf8(message)) return "a message that is not UTF-8: " + quote_input(message);
  for (const auto& word : field_words)
    if (message.find(word) != std::string::npos) return {};
  // A field the input made up is named quoted (escaped when not plain).
  if (message.front() == '"') return {};
  auto first = "\"" + message.substr(0, message.find_first_of(" .[")) + "\"";
  if (first.size() > 2 && input.find(first) != std::string::npos) return {};
  return "a message naming no field: " + message;
}

#define FUZZ_CHECK(cond, input, what) \
  BOOST_CHECK_MESSAGE(                \
      cond, "seed " << run_seed() << ", input " << quote_input(input, 300) << ": " << what)

template <class Decoded>
void check_decoded(const std::string& input, const caf::expected<Decoded>& decoded) {
  if (!decoded) {
    auto problem = bad_error(decoded.error(), input);
    FUZZ_CHECK(problem.empty(), input, problem);
    return;
  }
  if constexpr (!std::is_same_v<Decoded, json::executor_answer>) {
    auto err = [&] {
      if constexpr (std::is_same_v<Decoded, pb::CancelRequest>)
        return validate(*decoded);
      else
        return validate(*decoded, input_limits{});
    }();
    if (err) {
      auto problem = bad_error(err, input);
      FUZZ_CHECK(problem.empty(), input, problem);
    }
  }
}

const std::vector<std::string> submit_seeds = {
    R"({"type": "NOOP", "key": "k1", "version": 2, "payload": {"a": [1, 2.5, "x", null]},
        "execute_at": "2026-11-21T22:52:00Z", "priority": 2, "max_retries": 3, "timeout_ms": 500,
        "backoff": {"kind": "exponential", "base_ms": 10, "cap_ms": 100, "jitter": 0.2},
        "batch": "b", "trace_id": "0af7651916cd43dd8448eb211c80319c"})",
    R"({"tasks": [{"type": "A", "key": "1"}, {"type": "B", "key": "2", "payload": [[[]]]}]})",
    R"({"type": "T", "key": "k", "version": "12345678901234", "shard_index": 0, "shard_total": 2})",
};
const std::vector<std::string> reschedule_seeds = {
    R"({"type": "T", "key": "k", "execute_at": "2026-11-21T22:52:00.5+01:00", "payload": {"x": 1}})"};
const std::vector<std::string> cancel_seeds = {R"({"id": 42})", R"({"type": "T", "key": "k"})",
                                               R"({"id": "42"})"};
const std::vector<std::string> result_seeds = {
    R"({"attempt": 1, "outcome": "succeeded", "result": {"rows": [1, 2]}})",
    R"({"attempt": "3", "outcome": "retry", "error": "busy"})"};
const std::vector<std::string> answer_seeds = {
    R"({"outcome": "fail", "error": {"why": "no"}, "result": [1]})", R"({"rows": 3})", R"([1, 2])",
    "not json at all"};

const std::vector<std::string> job_seeds = {
    R"({"schedule": "0 30 2 * * MON-FRI", "time_zone": "Europe/Berlin", "type": "T",
        "payload": {"a": 1}, "backoff": {"kind": "fixed", "base_ms": 5}, "misfire": "catch_up",
        "catch_up_limit": 3, "overlap": "skip", "enabled": false, "description": "d"})",
    R"({"schedule": "@every 90s", "type": "T", "routing": "broadcast", "shards": 4})"};
const std::vector<std::string> trigger_seeds = {R"({"payload": {"manual": [1, 2]}})", "", "{}"};

constexpr int rounds = 10000;

}  // namespace

BOOST_AUTO_TEST_SUITE(decoders)

BOOST_AUTO_TEST_CASE(json_bodies) {
  BOOST_TEST_MESSAGE("fuzz seed " << run_seed());
  fuzzer f{1};
  for (int i = 0; i < rounds; ++i) {
    bool batch = false;
    auto in = f.input(submit_seeds);
    check_decoded(in, json::decode_submit(in, batch));
    in = f.input(reschedule_seeds);
    check_decoded(in, json::decode_reschedule(in));
    in = f.input(cancel_seeds);
    check_decoded(in, json::decode_cancel(in));
    in = f.input(result_seeds);
    check_decoded(in, json::decode_result_report(in));
    in = f.input(job_seeds);
    check_decoded(in, json::decode_job(in, "fuzz-job"));
    in = f.input(trigger_seeds);
    check_decoded(in, json::decode_trigger(in));
    in = f.input(answer_seeds);
    auto answer = json::decode_executor_answer(in);
    check_decoded(in, answer);
    if (answer) FUZZ_CHECK(is_utf8(answer->result) && is_utf8(answer->error), in, "not UTF-8");
  }
}

BOOST_AUTO_TEST_CASE(protobuf_bodies) {
  fuzzer f{2};
  pb::SubmitTasks tasks;
  auto t = tasks.add_tasks();
  t->set_type("NOOP");
  t->set_key("k");
  t->set_payload(R"({"a": [1, 2]})");
  t->set_priority(2);
  t->set_batch("b");
  t->mutable_execute_at()->set_seconds(1800000000);
  pb::ResultReport report;
  report.set_attempt(1);
  report.set_outcome(pb::OUTCOME_SUCCEEDED);
  report.set_result("[1]");
  std::vector<std::string> seeds = {tasks.SerializeAsString(), report.SerializeAsString()};
  for (int i = 0; i < rounds; ++i) {
    auto in = f.input(seeds);
    pb::SubmitTasks decoded_tasks;
    if (decoded_tasks.ParseFromString(in))
      check_decoded(in, caf::expected<pb::SubmitTasks>{decoded_tasks});
    pb::ResultReport decoded_report;
    if (decoded_report.ParseFromString(in))
      check_decoded(in, caf::expected<pb::ResultReport>{decoded_report});
  }
}

BOOST_AUTO_TEST_CASE(rfc3339_times) {
  fuzzer f{3};
  std::vector<std::string> seeds = {"2026-11-21T22:52:00Z", "2024-02-29T23:59:59.999999+14:00",
                                    "0001-01-01 00:00:00+00", "9999-12-31T23:59:59.5-12:30"};
  for (int i = 0; i < rounds * 3; ++i) {
    auto in = f.input(seeds, 40);
    auto parsed = parse_rfc3339(in);
    if (!parsed) continue;
    auto again = parse_rfc3339(format_rfc3339(*parsed));
    FUZZ_CHECK(again && *again == *parsed, in,
               "does not survive formatting: " << format_rfc3339(*parsed));
  }
}

BOOST_AUTO_TEST_CASE(durations) {
  fuzzer f{4};
  std::vector<std::string> seeds = {"250ms",        "5s", "2m", "24h", "7d", "9223372036854775807d",
                                    "106751991167d"};
  for (int i = 0; i < rounds * 3; ++i) {
    auto in = f.input(seeds, 24);
    auto parsed = parse_duration(in);
    if (parsed)
      FUZZ_CHECK(parsed->count() >= 0 && *parsed <= max_duration, in, "out of range");
    else
      FUZZ_CHECK(is_utf8(error_message(parsed.error())), in, "message not UTF-8");
  }
}

BOOST_AUTO_TEST_CASE(cron_schedules_and_zones) {
  fuzzer f{7};
  std::vector<std::string> seeds = {
      "*/15 * * * *",      "0 30 2 ? * MON-FRI", "0 0 L * *", "0 0 15W,LW * *",
      "0 0 * * 5#3,1L",    "@every 1h30m",       "@daily",    "0 0 29 2 *",
      "0 0 * jan,JUL sun", "10-50/20 7/3 * * *"};
  std::vector<std::string> zones = {"UTC", "Europe/Berlin", "America/New_York", "Asia/Kathmandu"};
  auto after = cron::seconds_time{std::chrono::seconds{1'800'000'000}};
  for (int i = 0; i < rounds; ++i) {
    auto in = f.input(seeds, 60);
    auto schedule = cron::parse(in, i % 2 == 0 ? cron::dialect::unix_cron : cron::dialect::quartz);
    if (!schedule) {
      auto message = error_message(schedule.error());
      FUZZ_CHECK(message.rfind("schedule: ", 0) == 0 && is_utf8(message), in,
                 "a bad message: " << quote_input(message));
      continue;
    }
    auto zone_name = f.input(zones, 40);
    auto zone = cron::find_zone(zone_name);
    if (!zone) {
      auto message = error_message(zone.error());
      FUZZ_CHECK(message.rfind("time_zone: ", 0) == 0 && is_utf8(message), zone_name,
                 "a bad message: " << quote_input(message));
      continue;
    }
    auto next = cron::next_after(*schedule, *zone, after, after);
    if (next) FUZZ_CHECK(*next > after, in, "the next fire time is not later");
  }
}

BOOST_AUTO_TEST_CASE(config_files) {
  fuzzer f{5};
  std::ifstream example{std::string{TASKMILL_SOURCE_DIR} + "/config/taskmill.example.toml"};
  std::string text{std::istreambuf_iterator<char>{example}, {}};
  BOOST_REQUIRE(!text.empty());
  std::vector<std::string> seeds = {text, "[types.X]\nexecutor = \"http\"\nurl = \"http://h/x\"\n",
                                    "[scheduling]\nweights = [16, 8, 4, 2, 1]\n"};
  auto path = std::filesystem::temp_directory_path() /
              ("taskmill-fuzz-" + std::to_string(::getpid()) + ".toml");
  for (int i = 0; i < rounds / 3; ++i) {
    auto in = f.input(seeds, 200);
    std::ofstream{path, std::ios::trunc | std::ios::binary} << in;
    auto cfg = load_config(path.string(), {});
    if (!cfg) FUZZ_CHECK(!error_message(cfg.error()).empty(), in, "an error without a message");
  }
  std::filesystem::remove(path);
}

BOOST_AUTO_TEST_SUITE_END()

namespace {

struct http_fixture : test::nodes_fixture {
  http_fixture() : nodes_fixture("fuzz") {
    auto cfg = test::test_node_config("fuzz-node");
    cfg.api.max_body_bytes = 64 << 10;
    port = start(cfg).api_port();
    db.exec(
        "SELECT taskmill.submit('KEEP', k::text, payload => '{\"v\": 1}', "
        "execute_at => now() + interval '1 day') FROM generate_series(1, 5) k");
  }

  /// Everything stored that a request could change, but for the tasks that
  /// jobs fire on their own (batch <job>@<time>).
  std::string snapshot() const {
    return db.scalar(
        "SELECT md5(coalesce(string_agg(t::text, '|' ORDER BY id), '')) || "
        "(SELECT count(*) FROM taskmill.attempts) FROM taskmill.tasks t "
        "WHERE t.batch IS NULL OR strpos(t.batch, '@') = 0");
  }

  uint16_t port = 0;
};

std::string request(const std::string& method, const std::string& target,
                    const std::string& body = {}, const std::string& extra_headers = {}) {
  return method + " " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\n" + extra_headers +
         "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
         "\r\n\r\n" + body;
}

}  // namespace

BOOST_FIXTURE_TEST_SUITE(http, http_fixture)

BOOST_AUTO_TEST_CASE(requests_end_to_end) {
  BOOST_TEST_MESSAGE("fuzz seed " << run_seed());
  fuzzer f{6};
  std::vector<std::string> seeds = {
      request("POST", "/v1/tasks", R"({"type": "FUZZ", "key": "k", "payload": {"a": [1]}})"),
      request("POST", "/v1/tasks", R"({"tasks": [{"type": "FUZZ", "key": "1", "priority": 5}]})"),
      request("POST", "/v1/tasks/reschedule",
              R"({"type": "FUZZ", "key": "k", "execute_at": "2099-01-01T00:00:00Z"})"),
      request("POST", "/v1/tasks/cancel", R"({"type": "FUZZ", "key": "k"})"),
      request("POST", "/v1/tasks/999999/result", R"({"attempt": 1, "outcome": "succeeded"})"),
      request("GET", "/v1/tasks?type=KEEP&status=pending&limit=2"),
      request("GET", "/v1/tasks/1/attempts"),
      request("GET", "/v1/batches/b1"),
      request("HEAD", "/v1/stats"),
      request("GET", "/readyz", {}, "Authorization: Bearer x\r\nAccept: application/json\r\n"),
      request("PUT", "/v1/jobs/fz",
              R"({"schedule": "0 0 1 1 *", "type": "FUZZ", "misfire": "skip", "payload": {}})"),
      request("POST", "/v1/jobs/fz/trigger", R"({"payload": {"n": 1}})"),
      request("GET", "/v1/jobs/fz/next?count=3"),
      request("GET", "/v1/jobs/fz/firings?limit=2"),
      request("POST", "/v1/jobs/fz/pause"),
      request("GET", "/v1/alerts?since=2026-01-01T00:00:00Z&limit=3"),
      request("GET", "/v1/alerts?since=12"),
  };
  auto before = snapshot();
  auto deadline = std::chrono::steady_clock::now() + 60s;
  int sent = 0;
  for (; sent < 5000 && std::chrono::steady_clock::now() < deadline; ++sent) {
    auto in = f.input(seeds, 300);
    auto raw = test::raw_exchange(port, in, 10s);
    auto status = test::first_status(raw);
    // Bytes with no request in them (only line ends) get no answer.
    bool no_request = in.find_first_not_of("\r\n") == std::string::npos;
    FUZZ_CHECK((status >= 200 && status < 500) || (no_request && raw.empty()), in,
               "answered " << quote_input(raw, 300));
    auto after = snapshot();
    if (status >= 400) FUZZ_CHECK(after == before, in, "a refused request changed what is stored");
    before = after;
    if (status == 400 && in.rfind("HEAD ", 0) != 0) {
      auto body = raw.substr(std::min(raw.size(), raw.find("\r\n\r\n")));
      bool names = false;
      for (const auto& word : field_words) names = names || body.find(word) != std::string::npos;
      FUZZ_CHECK(names && is_utf8(body), in, "an error naming nothing: " << quote_input(body));
    }
  }
  BOOST_TEST_MESSAGE(sent << " requests sent");
  BOOST_CHECK_GE(sent, 1000);
  BOOST_CHECK_EQUAL(test::first_status(test::raw_exchange(port, request("GET", "/readyz"))), 200);
}

// Host, Origin and Content-Type in every mix, on reads and changes: a Host
// that is not the node is 421, then a foreign Origin 403, then a change
// whose body is not JSON or protobuf 415, and none of those changes
// anything; the rest is answered as usual.
BOOST_AUTO_TEST_CASE(where_a_request_comes_from_is_decided_first) {
  BOOST_TEST_MESSAGE("fuzz seed " << run_seed());
  std::mt19937_64 rng{run_seed() ^ 7};
  auto pick = [&](const auto& options) { return options[rng() % options.size()]; };
  const std::vector<std::pair<std::string, bool>> hosts{{"127.0.0.1", true},
                                                        {"localhost:1", true},
                                                        {"[::1]", true},
                                                        {"attacker.example", false},
                                                        {"127.0.0.1.attacker.example", false},
                                                        {"", true},
                                                        {"a b", false},
                                                        {"\xff\xfe", false}};
  // An origin is the node's own when it names the Host sent.
  const std::vector<std::string> origins{"",
                                         "http://127.0.0.1",
                                         "https://127.0.0.1",
                                         "http://localhost:1",
                                         "http://[::1]",
                                         "http://attacker.example",
                                         "null",
                                         "http://127.0.0.1:1",
                                         "\x01garbage"};
  const std::vector<std::pair<std::string, bool>> types{
      {"application/json", true},
      {"application/json; charset=utf-8", true},
      {"APPLICATION/X-PROTOBUF", true},
      {"text/plain", false},
      {"application/x-www-form-urlencoded", false},
      {"multipart/form-data; boundary=x", false},
      {"", false},
      {"application/json\x01", false}};
  const std::vector<std::tuple<std::string, std::string, std::string>> calls{
      {"POST", "/v1/tasks", R"({"type": "FUZZ", "key": "h"})"},
      {"POST", "/v1/jobs/fzh/trigger", ""},
      {"POST", "/v1/tasks/cancel", R"({"type": "KEEP", "key": "k"})"},
      {"PUT", "/v1/jobs/fzh", R"({"schedule": "0 0 1 1 *", "type": "FUZZ"})"},
      {"DELETE", "/v1/jobs/nothere", ""},
      {"GET", "/v1/stats", ""},
      {"GET", "/healthz", ""},
      {"GET", "/ui/", ""}};
  int sent = 0;
  for (; sent < 600; ++sent) {
    auto [host, good_host] = pick(hosts);
    auto origin = pick(origins);
    bool good_origin =
        origin.empty() ||
        (!host.empty() && (origin == "http://" + host || origin == "https://" + host));
    auto [type, good_type] = pick(types);
    auto [method, target, body] = pick(calls);
    std::string in = method + " " + target + " HTTP/1.1\r\n";
    if (!host.empty()) in += "Host: " + host + "\r\n";
    if (!origin.empty()) in += "Origin: " + origin + "\r\n";
    if (!type.empty()) in += "Content-Type: " + type + "\r\n";
    in += "Content-Length: " + std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
    auto before = snapshot();
    auto status = test::first_status(test::raw_exchange(port, in, 10s));
    bool change = method != "GET";
    int expected = !good_host ? 421 : !good_origin ? 403 : change && !good_type ? 415 : 0;
    // Bytes no header can hold are refused before: 400.
    bool garbled = host.find_first_of("\xff\x01") != std::string::npos ||
                   origin.find('\x01') != std::string::npos ||
                   type.find('\x01') != std::string::npos;
    if (garbled)
      FUZZ_CHECK(status == 400 || status == expected, in, "answered " << status);
    else if (expected != 0)
      FUZZ_CHECK(status == expected, in, "answered " << status << ", not " << expected);
    else
      FUZZ_CHECK(status >= 200 && status < 500 && status != 403 && status != 415 && status != 421,
                 in, "answered " << status);
    if (status >= 400)
      FUZZ_CHECK(snapshot() == before, in, "a refused request changed what is stored");
  }
  BOOST_TEST_MESSAGE(sent << " requests sent");
}

BOOST_AUTO_TEST_SUITE_END()
