// Pure logic without a database, run before everything else: text checks,
// times, the JSON codec, validation, fair shares and what executors make of
// their answers.
#define BOOST_TEST_MODULE units
#include <boost/test/unit_test.hpp>

#include "actors/executors/builtin.hpp"
#include "actors/executors/http_executor.hpp"
#include "actors/limits/fair_shares.hpp"
#include "messages/errors.hpp"
#include "messages/json_codec.hpp"
#include "messages/text.hpp"
#include "messages/time.hpp"
#include "messages/validate.hpp"

#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <random>

using namespace taskmill;

namespace {

std::string error_of(const caf::error& err) {
  return err ? error_message(err) : std::string{"no error"};
}

template <class T>
std::string error_of(const caf::expected<T>& x) {
  return x ? std::string{"no error"} : error_message(x.error());
}

}  // namespace

BOOST_AUTO_TEST_SUITE(text)

BOOST_AUTO_TEST_CASE(utf8_is_checked_as_rfc_3629_says) {
  for (const char* good : {"", "plain", "caf\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80",
                           "\xef\xbf\xbf", "\xf4\x8f\xbf\xbf"})
    BOOST_CHECK_MESSAGE(is_utf8(good), quote_input(good));
  for (const char* bad : {"\xff", "\xc3", "\xc3\x28", "\xc0\xaf", "\xe0\x80\xaf", "\xed\xa0\x80",
                          "\xf0\x80\x80\xaf", "\xf4\x90\x80\x80", "\xf5\x80\x80\x80", "ab\x80"})
    BOOST_CHECK_MESSAGE(!is_utf8(bad), quote_input(bad));
}

BOOST_AUTO_TEST_CASE(quoted_input_is_valid_utf8_and_bounded) {
  BOOST_CHECK_EQUAL(quote_input("ok"), "\"ok\"");
  BOOST_CHECK_EQUAL(quote_input("a\xff\"b\n"), "\"a\\xff\\\"b\\x0a\"");
  BOOST_CHECK_EQUAL(quote_input("caf\xc3\xa9"), "\"caf\xc3\xa9\"");
  BOOST_CHECK_EQUAL(quote_input(std::string(100, 'x'), 5), "\"xxxxx...\"");
  BOOST_CHECK(text_problem(std::string{"a\0b", 3}) != nullptr);
  BOOST_CHECK(text_problem("fine") == nullptr);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(times)

BOOST_AUTO_TEST_CASE(rfc3339_round_trips_and_refuses_what_is_not) {
  auto t = parse_rfc3339("2026-11-21T23:52:00.5+01:00");
  BOOST_REQUIRE(t);
  BOOST_CHECK_EQUAL(format_rfc3339(*t), "2026-11-21T22:52:00.5Z");
  BOOST_CHECK(parse_rfc3339("2024-02-29T00:00:00Z"));
  for (const char* bad :
       {"2023-02-29T00:00:00Z", "2026-13-01T00:00:00Z", "2026-11-21T24:00:00Z", "2026-11-21",
        "tomorrow", "9999-12-31T23:59:59-01:00", "0000-12-31T23:59:59Z", "2026-11-21T22:52:00"})
    BOOST_CHECK_MESSAGE(!parse_rfc3339(bad), bad);
  BOOST_CHECK(parse_rfc3339("9999-12-31T23:59:59Z"));
  BOOST_CHECK(parse_rfc3339("0001-01-01T00:00:00Z"));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(codec)

BOOST_AUTO_TEST_CASE(bodies_decode_and_name_the_field_of_every_problem) {
  bool batch = false;
  auto ok =
      json::decode_submit(R"({"type": "T", "key": "k", "priority": 2, "payload": [1]})", batch);
  BOOST_REQUIRE(ok);
  BOOST_CHECK(!batch);
  BOOST_CHECK_EQUAL(ok->tasks(0).payload(), "[1]");
  BOOST_CHECK_EQUAL(error_of(json::decode_submit(R"({"tasks": [{"type": "T", "key": "k"},
                                                   {"type": "T", "key": "k", "priority": 1e999}]})",
                                                 batch)),
                    "tasks[1].priority is a number out of range");
  BOOST_CHECK_EQUAL(error_of(json::decode_submit(R"({"type": "T", "key": "k\u0000"})", batch)),
                    "key must not contain the NUL character");
  BOOST_CHECK_EQUAL(error_of(json::decode_submit("{\"type\": \"T\xff\"}", batch)),
                    "type is not valid UTF-8 (at byte 12)");
  BOOST_CHECK_EQUAL(
      error_of(json::decode_submit(R"({"type": "T", "key": "k", "colour": 1})", batch)),
      "unknown field colour");
  auto deep = [](int levels) {
    return std::string(static_cast<size_t>(levels), '[') +
           std::string(static_cast<size_t>(levels), ']');
  };
  auto too_deep = error_of(
      json::decode_submit(R"({"type": "T", "key": "k", "payload": )" + deep(100) + "}", batch));
  BOOST_CHECK_EQUAL(too_deep.substr(0, 14), "payload[0][0][");
  BOOST_CHECK(too_deep.find("... is nested deeper than 64 levels") != std::string::npos);
  BOOST_CHECK_EQUAL(error_of(json::decode_cancel(deep(100000))).substr(0, 14), "the body[0][0]");
}

BOOST_AUTO_TEST_CASE(executor_answers_are_results_overrides_or_nothing) {
  auto plain = json::decode_executor_answer("not json");
  BOOST_REQUIRE(plain);
  BOOST_CHECK(plain->result.empty());
  auto result = json::decode_executor_answer(R"({"rows": 3})");
  BOOST_REQUIRE(result);
  BOOST_CHECK_EQUAL(result->result, R"({"rows":3})");
  auto override = json::decode_executor_answer(R"({"outcome": "fail", "error": "no"})");
  BOOST_REQUIRE(override);
  BOOST_CHECK_EQUAL(override->outcome, pb::OUTCOME_FAIL);
  BOOST_CHECK(!json::decode_executor_answer(R"({"outcome": "maybe"})"));
  // A number no parser can hold makes the body no JSON: it says nothing.
  auto huge = json::decode_executor_answer(R"({"result": 1e400})");
  BOOST_REQUIRE(huge);
  BOOST_CHECK(huge->result.empty());
  BOOST_CHECK(!json::decode_executor_answer(R"({"result": "\u0000"})"));
}

BOOST_AUTO_TEST_CASE(errors_are_valid_json_whatever_their_message) {
  auto body = json::encode_error("invalid_argument", "bad \xff byte");
  BOOST_CHECK(is_utf8(body));
  BOOST_CHECK(body.find("invalid_argument") != std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(validation)

BOOST_AUTO_TEST_CASE(the_node_checks_only_what_sql_cannot_see) {
  pb::SubmitTasks tasks;
  auto t = tasks.add_tasks();
  t->set_type("T");
  t->set_key("k");
  BOOST_CHECK(!validate(tasks, input_limits{}));
  // Values are the rules' (taskmill.task_problem): not checked here.
  t->set_priority(9);
  t->mutable_backoff()->set_jitter(std::numeric_limits<double>::quiet_NaN());
  BOOST_CHECK(!validate(tasks, input_limits{}));
  t->set_payload(R"({"a": "b)" + std::string{"\0", 1} + "\"}");
  BOOST_CHECK_NE(error_of(validate(tasks, input_limits{})).find("payload"), std::string::npos);
  t->set_payload(std::string(200, 'x'));
  BOOST_CHECK_EQUAL(error_of(validate(tasks, input_limits{100})),
                    "payload is 200 bytes, more than the limit of 100");
  t->set_payload("{}");
  t->set_batch("b\xff");
  BOOST_CHECK_EQUAL(error_of(validate(tasks, input_limits{})), "batch must be valid UTF-8");
  t->set_batch("b");
  t->set_key(std::string{"k\0", 2});
  BOOST_CHECK_EQUAL(error_of(validate(tasks, input_limits{})),
                    "key must not contain the NUL character");
  t->set_key("k");
  t->mutable_execute_at()->set_seconds(last_time_seconds + 1);
  BOOST_CHECK_EQUAL(error_of(validate(tasks, input_limits{})),
                    "execute_at must be a time between years 1 and 9999");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(fairness)

BOOST_AUTO_TEST_CASE(levels_with_work_share_claims_by_their_weights) {
  fair_shares shares{{16, 8, 4, 2, 1}};
  fair_shares::counts total{};
  for (int round = 0; round < 100; ++round) {
    auto asked = shares.quotas(31);
    BOOST_CHECK_EQUAL(std::accumulate(asked.begin(), asked.end(), 0), 31);
    shares.settle(asked, asked);
    for (int i = 0; i < fair_shares::levels; ++i) total[i] += asked[i];
  }
  // 3100 claims over weights summing to 31: 1600, 800, 400, 200, 100, each
  // within a claim or so per round.
  std::array<int, fair_shares::levels> expected{1600, 800, 400, 200, 100};
  for (int i = 0; i < fair_shares::levels; ++i)
    BOOST_CHECK_MESSAGE(std::abs(total[i] - expected[i]) <= 5,
                        "level " << i + 1 << " got " << total[i]);
}

BOOST_AUTO_TEST_CASE(a_single_level_with_work_gets_all_capacity) {
  fair_shares shares{{16, 8, 4, 2, 1}};
  auto asked = shares.quotas(50);
  // Only level 5 had work: every other level claimed nothing.
  shares.settle(asked, {0, 0, 0, 0, asked[4]});
  int claimed = 0;
  for (int round = 0; round < 10; ++round) {
    asked = shares.quotas(50);
    claimed = asked[4];
    shares.settle(asked, {0, 0, 0, 0, asked[4]});
  }
  BOOST_CHECK_GE(claimed, 46);  // all but the probes of the idle levels
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(executors)

namespace {

pb::Task task_with(const std::string& payload) {
  pb::Task t;
  t.set_id(7);
  t.set_attempt(2);
  t.set_type("T");
  t.set_payload(payload);
  t.set_timeout_ms(1500);
  return t;
}

http_answer answer(int status, std::string body = {}) {
  http_answer a;
  a.status = status;
  a.body = std::move(body);
  return a;
}

}  // namespace

BOOST_AUTO_TEST_CASE(http_answers_map_to_outcomes_as_spec_4_says) {
  auto task = task_with("{}");
  auto ok = outcome_of_answer(task, answer(200, R"({"rows": 3})"));
  BOOST_REQUIRE(ok);
  BOOST_CHECK_EQUAL(ok->outcome(), pb::OUTCOME_SUCCEEDED);
  BOOST_CHECK_EQUAL(ok->result(), R"({"rows":3})");
  BOOST_CHECK_EQUAL(ok->task_id(), 7);
  BOOST_CHECK_EQUAL(ok->attempt(), 2);
  BOOST_CHECK_EQUAL(ok->type(), "T");
  // Accepted: the result comes later.
  BOOST_CHECK(!outcome_of_answer(task, answer(202)));
  // Worth another attempt, or not.
  for (int status : {408, 425, 429, 500, 503})
    BOOST_CHECK_EQUAL(outcome_of_answer(task, answer(status))->outcome(), pb::OUTCOME_RETRY);
  for (int status : {400, 404, 409, 422}) {
    auto failed = outcome_of_answer(task, answer(status, "no such thing"));
    BOOST_CHECK_EQUAL(failed->outcome(), pb::OUTCOME_FAIL);
    BOOST_CHECK_EQUAL(failed->error(), "HTTP " + std::to_string(status) + ": no such thing");
  }
  // The body may say otherwise, whatever the status.
  auto overridden = outcome_of_answer(task, answer(500, R"({"outcome": "fail", "error": "x"})"));
  BOOST_CHECK_EQUAL(overridden->outcome(), pb::OUTCOME_FAIL);
  BOOST_CHECK_EQUAL(overridden->error(), "x");
  // No answer at all.
  http_answer none;
  none.error = "connection refused";
  auto lost = outcome_of_answer(task, none);
  BOOST_CHECK_EQUAL(lost->outcome(), pb::OUTCOME_RETRY);
  BOOST_CHECK_EQUAL(lost->error(), "connection refused");
}

BOOST_AUTO_TEST_CASE(an_http_call_names_its_attempt_and_carries_the_trace) {
  auto task = task_with("{}");
  task.set_trace_id("4bf92f3577b34da6a3ce929d0e0e4736");
  std::mt19937_64 rng{1};
  auto call = http_call_for(task, "http://127.0.0.1:1/x", rng);
  BOOST_CHECK(call.timeout == std::chrono::milliseconds{1500});
  std::map<std::string, std::string> headers(call.headers.begin(), call.headers.end());
  BOOST_CHECK_EQUAL(headers["Idempotency-Key"], "7-2");
  BOOST_CHECK_EQUAL(headers["traceparent"].substr(0, 36), "00-4bf92f3577b34da6a3ce929d0e0e4736-");
  BOOST_CHECK_EQUAL(headers["traceparent"].size(), 55u);
}

BOOST_AUTO_TEST_CASE(builtin_executors_sleep_as_told_and_fail_at_once) {
  BOOST_CHECK(sleep_time(task_with("250")) == std::chrono::milliseconds{250});
  BOOST_CHECK(sleep_time(task_with(R"({"ms": 40, "other": 9})")) == std::chrono::milliseconds{40});
  BOOST_CHECK(sleep_time(task_with("{}")) == std::chrono::milliseconds{0});
  BOOST_CHECK_EQUAL(instant_outcome(executor_kind::fail, task_with("{}")).outcome(),
                    pb::OUTCOME_FAIL);
  BOOST_CHECK_EQUAL(instant_outcome(executor_kind::noop, task_with("{}")).outcome(),
                    pb::OUTCOME_SUCCEEDED);
}

BOOST_AUTO_TEST_SUITE_END()
