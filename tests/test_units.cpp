// Pure logic without a database, run before everything else: text checks,
// times, the JSON codec, validation, fair shares, what executors make of
// their answers, and cron schedules.
#define BOOST_TEST_MODULE units
#include <boost/test/unit_test.hpp>

#include "actors/api.hpp"
#include "actors/dispatcher/outcome_batches.hpp"
#include "actors/executors/builtin.hpp"
#include "actors/executors/http_executor.hpp"
#include "actors/hand_offs/hand_offs.hpp"
#include "actors/http/browser_guard.hpp"
#include "actors/jobs/firing_plan.hpp"
#include "actors/limiter.hpp"
#include "actors/limits/fair_shares.hpp"
#include "actors/logging/log_format.hpp"
#include "actors/metrics/node_metrics.hpp"
#include "messages/cluster_port.hpp"
#include "messages/cluster_tls.hpp"
#include "messages/errors.hpp"
#include "messages/json_codec.hpp"
#include "messages/peer_proof.hpp"
#include "messages/refusal_log.hpp"
#include "messages/schedule.hpp"
#include "messages/text.hpp"
#include "messages/time.hpp"
#include "messages/url.hpp"
#include "messages/validate.hpp"
#include "storage/finished_estimate.hpp"
#include "storage/hand_off_notice.hpp"
#include "storage/lock_table.hpp"
#include "storage/storage_internal.hpp"
#include "tools/node/config_reload.hpp"
#include "tools/tcp_proxy.hpp"

#include <nlohmann/json.hpp>

#include <prometheus/counter.h>
#include <spdlog/details/log_msg.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <fstream>
#include <limits>
#include <map>
#include <numeric>
#include <random>
#include <set>
#include <sstream>
#include <thread>

using namespace taskmill;
using namespace std::chrono_literals;

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

BOOST_AUTO_TEST_SUITE(peer_proofs)

BOOST_AUTO_TEST_CASE(a_proof_is_hmac_sha256_of_role_nonce_and_name) {
  constexpr auto join = proof_role::join;
  constexpr auto answer = proof_role::answer;
  // printf 'taskmill-join|abc|n1' | openssl dgst -sha256 -hmac k
  BOOST_CHECK_EQUAL(peer_proof("k", join, "abc", "n1"),
                    "ae344ff9775c5baff3fc497d838bbe4b5a006da628079cdf27a9abb70dddd101");
  // printf 'taskmill-answer|abc|n1' | openssl dgst -sha256 -hmac k
  BOOST_CHECK_EQUAL(peer_proof("k", answer, "abc", "n1"),
                    "120dc42e513f2327506fb7b7b8f17e2402c1250ad8f60b7581f65617dc28e400");
  BOOST_CHECK_NE(peer_proof("k2", join, "abc", "n1"), peer_proof("k", join, "abc", "n1"));
  BOOST_CHECK_NE(peer_proof("k", join, "abd", "n1"), peer_proof("k", join, "abc", "n1"));
  BOOST_CHECK_NE(peer_proof("k", join, "abc", "n2"), peer_proof("k", join, "abc", "n1"));
  BOOST_CHECK(same_secret(peer_proof("k", join, "abc", "n1"), peer_proof("k", join, "abc", "n1")));
  BOOST_CHECK(!same_secret(peer_proof("k", join, "abc", "n1"), ""));
  auto a = new_nonce(), b = new_nonce();
  BOOST_CHECK_EQUAL(a.size(), 32u);
  BOOST_CHECK_NE(a, b);
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

// Times are written and read by hand (civil days, no gmtime); these are the
// values where calendar arithmetic goes wrong first.
BOOST_AUTO_TEST_CASE(rfc3339_calendar_edges_read_and_write_as_the_calendar_says) {
  struct known {
    const char* text;
    int64_t micros;
  };
  for (auto [text, micros] : {
           known{"1970-01-01T00:00:00Z", 0},
           known{"1969-12-31T23:59:59.999999Z", -1},
           known{"1970-01-01T00:00:00.000001Z", 1},
           known{"2000-02-29T00:00:00Z", 951782400000000},
           known{"2026-11-21T22:52:00.12Z", 1795301520120000},
           known{"0001-01-01T00:00:00Z", first_time_seconds * 1000000},
           known{"9999-12-31T23:59:59.999999Z", last_time_seconds * 1000000 + 999999},
           known{"1900-03-01T00:00:00Z", -2203891200000000},
       }) {
    BOOST_CHECK_EQUAL(format_rfc3339(micros), text);
    auto parsed = parse_rfc3339(text);
    BOOST_REQUIRE_MESSAGE(parsed, text);
    BOOST_CHECK_EQUAL(*parsed, micros);
  }
  // PostgreSQL's text form, and a leap second as the next minute's first.
  for (auto [text, micros] : {known{"2026-11-25 00:12:34.5+00", 1795565554500000},
                              known{"2026-12-31T23:59:60Z", 1798761600000000}}) {
    auto parsed = parse_rfc3339(text);
    BOOST_REQUIRE_MESSAGE(parsed, text);
    BOOST_CHECK_EQUAL(*parsed, micros);
  }
  for (const char* bad : {"2100-02-29T00:00:00Z", "1900-02-29T00:00:00Z", "2026-04-31T00:00:00Z",
                          "2026-01-00T00:00:00Z", "9999-12-31T23:59:60Z"})
    BOOST_CHECK_MESSAGE(!parse_rfc3339(bad), bad);
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

// What the SQL writes (taskmill.hand_off_notice) is checked against a real
// server in test_claims; this is what the node makes of any notice.
BOOST_AUTO_TEST_CASE(hand_off_notices_carry_the_task_or_its_ids_for_the_node_they_name) {
  pb::HandOffs handed;
  BOOST_CHECK(db::add_if_handed_to(
      "node a",
      "7 2 42 node a\n"
      R"({"type": "T", "key": "k", "version": 3, "priority": 4, "payload": "{\"a\": 1}",)"
      R"( "retry_count": 1, "max_retries": 5, "timeout_ms": 900, "error": null, "batch": "b",)"
      R"( "shard_index": null, "shard_total": null, "trace_id": "tr", "execute_at_us": 1000000,)"
      R"( "started_at_us": 1000250})",
      handed));
  BOOST_REQUIRE_EQUAL(handed.hand_offs_size(), 1);
  BOOST_CHECK_EQUAL(handed.hand_offs(0).task_id(), 7);
  BOOST_CHECK_EQUAL(handed.hand_offs(0).attempt(), 2);
  BOOST_CHECK_EQUAL(handed.hand_offs(0).generation(), 42);
  const auto& task = handed.hand_offs(0).task();
  BOOST_CHECK_EQUAL(task.id(), 7);
  BOOST_CHECK_EQUAL(task.type(), "T");
  BOOST_CHECK_EQUAL(task.key(), "k");
  BOOST_CHECK_EQUAL(task.version(), 3);
  BOOST_CHECK_EQUAL(task.priority(), 4);
  BOOST_CHECK_EQUAL(task.payload(), R"({"a": 1})");
  BOOST_CHECK_EQUAL(task.attempt(), 2);
  BOOST_CHECK_EQUAL(task.retry_count(), 1);
  BOOST_CHECK_EQUAL(task.max_retries(), 5);
  BOOST_CHECK_EQUAL(task.timeout_ms(), 900);
  BOOST_CHECK_EQUAL(task.error(), "");
  BOOST_CHECK_EQUAL(task.batch(), "b");
  BOOST_CHECK_EQUAL(task.shard_total(), 0);
  BOOST_CHECK_EQUAL(task.trace_id(), "tr");
  BOOST_CHECK_EQUAL(task.picked_by(), "node a");
  BOOST_CHECK(task.status() == pb::RUNNING);
  BOOST_CHECK_EQUAL(to_micros(task.execute_at()), 1000000);
  BOOST_CHECK_EQUAL(to_micros(task.started_at()), 1000250);
  // Ids alone (the task did not fit), or a task that cannot be read: the
  // node reads it.
  BOOST_CHECK(db::add_if_handed_to("node a", "8 1 42 node a", handed));
  BOOST_CHECK(db::add_if_handed_to("node a", "9 1 42 node a\n{\"type\": ", handed));
  BOOST_CHECK(db::add_if_handed_to("node a", "10 1 42 node a\n{\"type\": 5}", handed));
  BOOST_REQUIRE_EQUAL(handed.hand_offs_size(), 4);
  for (int i = 1; i < 4; ++i) {
    BOOST_CHECK_EQUAL(handed.hand_offs(i).task_id(), 7 + i);
    BOOST_CHECK_EQUAL(handed.hand_offs(i).task().id(), 0);
  }
  // Another node's hand-offs are no hand-offs to this one.
  BOOST_CHECK(db::add_if_handed_to("node b", "11 1 42 node a", handed));
  BOOST_CHECK(db::add_if_handed_to("node", "11 1 42 node a\n{\"type\": \"T\"}", handed));
  BOOST_CHECK_EQUAL(handed.hand_offs_size(), 4);
  for (const char* bad : {"", "{\"type\": \"T\"}", "[1]", "9 x 42 node a", "9 1 42",
                          "9 1 42\nnode a", "0 1 42 node a", "9 0 42 node a"})
    BOOST_CHECK_MESSAGE(!db::add_if_handed_to("node a", bad, handed), bad);
  BOOST_CHECK_EQUAL(handed.hand_offs_size(), 4);
}

BOOST_AUTO_TEST_SUITE_END()

// A dispatcher's outcomes between an execution's end and the database
// (actors/dispatcher/outcome_batches): each is somewhere until storage
// answers for it, and those storage did not take go again in their order.
BOOST_AUTO_TEST_SUITE(outcome_bookkeeping)

namespace {

pb::TaskOutcome ended(int64_t task_id) {
  pb::TaskOutcome outcome;
  outcome.set_task_id(task_id);
  outcome.set_attempt(1);
  return outcome;
}

}  // namespace

BOOST_AUTO_TEST_CASE(an_outcome_is_held_until_storage_answers_for_its_batch) {
  outcome_batches book;
  BOOST_CHECK(book.take_recorded() == nullptr);
  book.record(ended(1));
  book.record(ended(2));
  BOOST_CHECK(book.holds(1));
  BOOST_CHECK_EQUAL(book.not_stored(), 2);
  auto first = book.take_recorded();
  BOOST_REQUIRE(first != nullptr);
  BOOST_CHECK_EQUAL(first->outcomes_size(), 2);
  BOOST_CHECK(book.take_recorded() == nullptr);
  book.record(ended(3));
  BOOST_CHECK(book.holds(2));
  BOOST_CHECK_EQUAL(book.not_stored(), 3);
  book.answered(first);
  BOOST_CHECK(!book.holds(1));
  BOOST_CHECK(!book.holds(2));
  BOOST_CHECK(book.holds(3));
  BOOST_CHECK_EQUAL(book.not_stored(), 1);
}

BOOST_AUTO_TEST_CASE(batches_storage_did_not_take_go_again_in_the_order_they_failed) {
  outcome_batches book;
  book.record(ended(1));
  auto first = book.take_recorded();
  book.record(ended(2));
  auto second = book.take_recorded();
  book.failed(second);
  book.failed(first);
  BOOST_CHECK(book.holds(1));
  BOOST_CHECK(book.holds(2));
  BOOST_CHECK_EQUAL(book.not_stored(), 2);
  auto again = book.take_failed();
  BOOST_CHECK(again == second);
  BOOST_CHECK_EQUAL(book.not_stored(), 2);
  BOOST_CHECK(book.take_failed() == first);
  BOOST_CHECK(book.take_failed() == nullptr);
  book.answered(second);
  book.answered(first);
  BOOST_CHECK_EQUAL(book.not_stored(), 0);
}

BOOST_AUTO_TEST_CASE(a_batch_made_elsewhere_is_held_while_it_is_on_its_way) {
  outcome_batches book;
  auto one = std::make_shared<pb::TaskOutcomes>();
  *one->add_outcomes() = ended(7);
  outcome_batches::batch sent = one;
  book.sending(sent);
  BOOST_CHECK(book.holds(7));
  BOOST_CHECK(book.take_recorded() == nullptr);
  book.answered(sent);
  BOOST_CHECK(!book.holds(7));
  BOOST_CHECK_EQUAL(book.not_stored(), 0);
}

BOOST_AUTO_TEST_SUITE_END()

// The bookkeeping of a node's offer to submits (actors/hand_offs): every
// permit the pusher holds beside its claims is the offer's, kept for a
// hand-off not heard of, or given back, never two of these and never lost.
BOOST_AUTO_TEST_SUITE(hand_offs_bookkeeping)

namespace {

pb::HandOffs hand_offs_of(std::initializer_list<int64_t> ids, int64_t generation,
                          bool carried = true) {
  pb::HandOffs heard;
  for (auto id : ids) {
    auto* h = heard.add_hand_offs();
    h->set_task_id(id);
    h->set_attempt(1);
    h->set_generation(generation);
    if (carried) h->mutable_task()->set_id(id);
  }
  return heard;
}

/// An offer of `permits` made after the listener connected.
hand_offs::offer make_offer(hand_offs& book, int32_t permits) {
  book.listener_connected();
  BOOST_REQUIRE_EQUAL(book.permits_to_offer(), permits);
  auto made = book.make(permits);
  BOOST_REQUIRE(made);
  return *made;
}

}  // namespace

BOOST_AUTO_TEST_CASE(no_offer_before_the_listener_connected_and_one_at_a_time) {
  hand_offs book{8, 1000};
  BOOST_CHECK(book.wants_offer());
  BOOST_CHECK_EQUAL(book.permits_to_offer(), 0);
  book.listener_connected();
  book.asking(true);
  BOOST_CHECK_EQUAL(book.permits_to_offer(), 0);
  book.asking(false);
  auto made = book.make(8);
  BOOST_REQUIRE(made);
  BOOST_CHECK_GT(made->generation, 1000);
  BOOST_CHECK(!book.wants_offer());
  BOOST_CHECK_EQUAL(book.permits_to_offer(), 0);
  BOOST_CHECK(!book.make(8));
  // Refused by storage, its permits are free, and the next one has a new
  // number.
  BOOST_CHECK_EQUAL(book.refused(made->generation, 8), 8);
  BOOST_CHECK(!book.standing());
  BOOST_CHECK_EQUAL(book.refused(made->generation, 8), 0);
  auto next = book.make(8);
  BOOST_REQUIRE(next);
  BOOST_CHECK_GT(next->generation, made->generation);
  // A node that offers nothing never wants to.
  hand_offs none{0, 1000};
  none.listener_connected();
  BOOST_CHECK(!none.wants_offer());
  BOOST_CHECK_EQUAL(none.permits_to_offer(), 0);
}

BOOST_AUTO_TEST_CASE(hand_offs_heard_take_the_offer_permits_and_it_is_topped_up_at_half) {
  hand_offs book{8, 0};
  auto offer = make_offer(book, 8);
  auto heard = hand_offs_of({1, 2, 3}, offer.generation);
  auto run = book.heard(heard);
  BOOST_CHECK(run.handed_off());
  BOOST_CHECK_EQUAL(run.task_ids_size(), 3);
  BOOST_CHECK_EQUAL(run.permits_held(), 3);
  BOOST_CHECK_EQUAL(run.tasks(2).id(), 3);
  BOOST_CHECK_EQUAL(book.offered(), 5);
  BOOST_CHECK_EQUAL(book.to_top_up().permits, 0);
  heard = hand_offs_of({4}, offer.generation);
  BOOST_CHECK_EQUAL(book.heard(heard).permits_held(), 1);
  auto top_up = book.to_top_up();
  BOOST_CHECK_EQUAL(top_up.generation, offer.generation);
  BOOST_CHECK_EQUAL(top_up.permits, 4);
  BOOST_CHECK(book.top_up(offer.generation, 4));
  BOOST_CHECK_EQUAL(book.offered(), 8);
  BOOST_CHECK(!book.top_up(offer.generation + 1, 4));
  // More hand-offs than the offer holds (it was topped up in the database
  // first): the rest take permits of their own, as do those of older offers.
  heard = hand_offs_of({5, 6, 7, 8, 9, 10, 11, 12, 13}, offer.generation);
  BOOST_CHECK_EQUAL(book.heard(heard).permits_held(), 8);
  heard = hand_offs_of({14}, offer.generation - 1);
  BOOST_CHECK_EQUAL(book.heard(heard).permits_held(), 0);
  BOOST_CHECK_EQUAL(book.offered(), 0);
}

BOOST_AUTO_TEST_CASE(an_offer_taken_back_keeps_permits_for_hand_offs_not_heard_of) {
  hand_offs book{8, 0};
  auto offer = make_offer(book, 8);
  auto heard = hand_offs_of({1}, offer.generation);
  book.heard(heard);
  auto withdrawn = book.withdraw();
  BOOST_REQUIRE(withdrawn);
  BOOST_CHECK_EQUAL(withdrawn->permits, 7);
  BOOST_CHECK(!book.withdraw());
  BOOST_CHECK_EQUAL(book.to_top_up().permits, 0);
  // Two more were heard of while it was taken back; submits took four of
  // the seven: two are unheard.
  heard = hand_offs_of({2, 3}, offer.generation);
  BOOST_CHECK_EQUAL(book.heard(heard).permits_held(), 2);
  auto settled = book.withdrawn(*withdrawn, 4);
  BOOST_CHECK_EQUAL(settled.keep.generation, offer.generation);
  BOOST_CHECK_EQUAL(settled.keep.permits, 2);
  BOOST_CHECK_EQUAL(settled.free, 3);
  BOOST_CHECK(!book.standing());
  BOOST_CHECK_EQUAL(book.kept_permits(), 2);
  // One is heard of and runs on its kept permit; the other never comes.
  heard = hand_offs_of({4}, offer.generation);
  BOOST_CHECK_EQUAL(book.heard(heard).permits_held(), 1);
  BOOST_CHECK_EQUAL(book.release(offer.generation), 1);
  BOOST_CHECK_EQUAL(book.release(offer.generation), 0);
  BOOST_CHECK_EQUAL(book.kept_permits(), 0);
  // An answer about an offer no longer standing changes nothing.
  BOOST_CHECK_EQUAL(book.withdrawn(*withdrawn, 4).free, 0);
}

BOOST_AUTO_TEST_CASE(a_claim_takes_the_offer_over_after_a_full_claim_or_when_in_doubt) {
  hand_offs book{8, 0};
  auto offer = make_offer(book, 8);
  // After a short claim, with permits enough, the offer stands.
  BOOST_CHECK_EQUAL(book.take_over(true, false).permits, 0);
  BOOST_CHECK(book.standing());
  auto over = book.take_over(false, false);
  BOOST_CHECK_EQUAL(over.generation, offer.generation);
  BOOST_CHECK_EQUAL(over.permits, 8);
  BOOST_CHECK(!book.standing());
  // Of three taken unheard by the claim's count, one was heard of
  // meanwhile (and took a permit of its own): two are kept.
  auto heard = hand_offs_of({1}, offer.generation);
  BOOST_CHECK_EQUAL(book.heard(heard).permits_held(), 0);
  auto kept = book.claim_took_back(over, 3);
  BOOST_CHECK_EQUAL(kept.permits, 2);
  BOOST_CHECK_EQUAL(book.kept_permits(), 2);
  // A claim whose answer was lost leaves the offer in doubt: the next
  // claim takes it back, even after a short one.
  offer = *book.make(6);
  over = book.take_over(false, false);
  book.claim_lost(over);
  BOOST_CHECK(book.standing());
  BOOST_CHECK(book.withdrawing());
  BOOST_CHECK_EQUAL(book.take_over(true, false).permits, 6);
  // So does one whose permits are short, and one after the listener
  // reconnected.
  offer = *book.make(5);
  BOOST_CHECK_EQUAL(book.take_over(true, true).permits, 5);
  offer = *book.make(5);
  book.listener_connected();
  BOOST_CHECK_EQUAL(book.take_over(true, false).permits, 5);
}

BOOST_AUTO_TEST_CASE(hand_offs_of_offers_made_before_a_read_of_what_runs_are_read_again) {
  hand_offs book{8, 0};
  auto before = make_offer(book, 8);
  book.withdrawn(*book.withdraw(), 3);
  BOOST_CHECK_EQUAL(book.kept_permits(), 3);
  // The read found what runs here: the kept permits go to its tasks.
  BOOST_CHECK_EQUAL(book.read_what_runs(), 3);
  BOOST_CHECK_EQUAL(book.kept_permits(), 0);
  auto heard = hand_offs_of({1}, before.generation);
  auto run = book.heard(heard);
  BOOST_CHECK_EQUAL(run.task_ids(0), 1);
  BOOST_CHECK_EQUAL(run.tasks(0).id(), 0);
  BOOST_CHECK_EQUAL(run.permits_held(), 0);
  auto after = *book.make(8);
  heard = hand_offs_of({2}, after.generation);
  run = book.heard(heard);
  BOOST_CHECK_EQUAL(run.tasks(0).id(), 2);
  BOOST_CHECK_EQUAL(run.permits_held(), 1);
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
    auto turns = shares.turns(31);
    BOOST_CHECK_EQUAL(turns.size(), 31u);
    auto claimed = fair_shares::levels_of(turns);
    shares.settle(turns, 31, claimed);
    for (int i = 0; i < fair_shares::levels; ++i) total[i] += claimed[i];
  }
  // 3100 claims over weights summing to 31: 1600, 800, 400, 200, 100, each
  // within a claim or so per round.
  std::array<int, fair_shares::levels> expected{1600, 800, 400, 200, 100};
  for (int i = 0; i < fair_shares::levels; ++i)
    BOOST_CHECK_MESSAGE(std::abs(total[i] - expected[i]) <= 5,
                        "level " << i + 1 << " got " << total[i]);
}

// A cluster-wide limit leaves a claim room for one or two of its turns: the
// turns it did not take stay owed, and over the rounds every level still
// gets its weight's share, the lightest included.
BOOST_AUTO_TEST_CASE(claims_cut_short_by_limits_keep_the_shares) {
  fair_shares shares{{16, 8, 4, 2, 1}};
  fair_shares::counts total{};
  for (int round = 0; round < 310; ++round) {
    auto turns = shares.turns(50);
    auto taken = 1 + round % 2;
    auto claimed = fair_shares::levels_of(turns, taken);
    shares.settle(turns, taken, claimed);
    for (int i = 0; i < fair_shares::levels; ++i) total[i] += claimed[i];
  }
  std::array<int, fair_shares::levels> expected{240, 120, 60, 30, 15};
  for (int i = 0; i < fair_shares::levels; ++i)
    BOOST_CHECK_MESSAGE(std::abs(total[i] - expected[i]) <= 2,
                        "level " << i + 1 << " got " << total[i]);
}

BOOST_AUTO_TEST_CASE(a_single_level_with_work_gets_all_capacity) {
  fair_shares shares{{16, 8, 4, 2, 1}};
  auto turns = shares.turns(50);
  // Only level 5 had work: every other level claimed nothing, and level 5
  // filled what they left.
  shares.settle(turns, 50, {0, 0, 0, 0, 50});
  for (int round = 0; round < 10; ++round) {
    turns = shares.turns(50);
    // A probe of each idle level first, then every turn is level 5's.
    BOOST_CHECK_EQUAL(turns.size(), 54u);
    BOOST_CHECK(
        (std::vector<int>(turns.begin(), turns.begin() + 4) == std::vector<int>{1, 2, 3, 4}));
    BOOST_CHECK_EQUAL(fair_shares::levels_of(turns)[4], 50);
    shares.settle(turns, 54, {0, 0, 0, 0, 50});
  }
}

// A level whose probe finds work takes its turns again from the next round.
BOOST_AUTO_TEST_CASE(a_level_that_gets_work_again_gets_its_turns) {
  fair_shares shares{{1, 1, 1, 1, 1}};
  auto turns = shares.turns(10);
  shares.settle(turns, 10, {0, 5, 5, 0, 0});
  turns = shares.turns(10);
  BOOST_CHECK_EQUAL(fair_shares::levels_of(turns)[0], 1);
  shares.settle(turns, 12, {1, 5, 4, 0, 0});
  BOOST_CHECK_GE(fair_shares::levels_of(shares.turns(10))[0], 3);
}

BOOST_AUTO_TEST_SUITE_END()

// What a node's claims may find free under cluster-wide limits, its own
// tasks in flight not deducted (actors/limiter.cpp).
BOOST_AUTO_TEST_SUITE(limits_room)

BOOST_AUTO_TEST_CASE(the_types_limits_bound_a_node_whose_every_type_has_one) {
  limiter_options o;
  o.types = {"A", "B"};
  o.type_limits = {{"A", 3}, {"B", 2}, {"C", 40}};
  BOOST_CHECK(most_running_under_limits(o, {}) == 5);
  o.global_limit = 4;
  BOOST_CHECK(most_running_under_limits(o, {}) == 4);
  o.global_limit = 9;
  BOOST_CHECK(most_running_under_limits(o, {}) == 5);
  // An executor of limited capacity adds its type's limit, or, without one,
  // leaves the types unbounded.
  BOOST_CHECK(most_running_under_limits(o, {{"C", 7}}) == 9);
  BOOST_CHECK(most_running_under_limits(o, {{"B", 7}}) == 5);
  BOOST_CHECK(most_running_under_limits(o, {{"D", 7}}) == 9);
  o.global_limit = 0;
  BOOST_CHECK(!most_running_under_limits(o, {{"D", 7}}));
}

BOOST_AUTO_TEST_CASE(a_type_without_a_limit_leaves_only_the_global_limit) {
  limiter_options o;
  o.types = {"A", "FREE"};
  o.type_limits = {{"A", 3}};
  BOOST_CHECK(!most_running_under_limits(o, {}));
  o.global_limit = 100;
  BOOST_CHECK(most_running_under_limits(o, {}) == 100);
  // A node that runs any type may meet types without limits.
  o.types = {"A"};
  o.any_type = true;
  BOOST_CHECK(most_running_under_limits(o, {}) == 100);
  o.global_limit = 0;
  BOOST_CHECK(!most_running_under_limits(o, {}));
  // Nor does a node that runs no type yet bound anything.
  o.any_type = false;
  o.types.clear();
  BOOST_CHECK(!most_running_under_limits(o, {}));
}

BOOST_AUTO_TEST_SUITE_END()

// The estimate of finished tasks a node holds for the stats of a large
// table (storage/finished_estimate.hpp).
struct estimate_fixture {
  using found = db::finished_estimate::found;
  static constexpr auto held_for = db::finished_estimate::held_for;
  db::finished_estimate e;
  db::finished_estimate::clock::time_point t0 =
      db::finished_estimate::clock::time_point{} + std::chrono::hours{1};
};

BOOST_FIXTURE_TEST_SUITE(finished_estimates, estimate_fixture)

pb::StatusCount finished(const std::string& type, int64_t n, bool estimated) {
  pb::StatusCount c;
  c.set_type(type);
  c.set_status(pb::SUCCEEDED);
  c.set_count(n);
  c.set_estimated(estimated);
  return c;
}

BOOST_AUTO_TEST_CASE(a_sample_is_answered_until_it_is_held_for_its_time) {
  BOOST_CHECK(e.ask_for_sample(t0));
  auto first = e.answer(found::sampled, {finished("A", 500, true)}, t0);
  BOOST_REQUIRE_EQUAL(first.size(), 1u);
  auto later = t0 + held_for - std::chrono::milliseconds{1};
  BOOST_CHECK(!e.ask_for_sample(later));
  auto held = e.answer(found::not_sampled, {}, later);
  BOOST_REQUIRE_EQUAL(held.size(), 1u);
  BOOST_CHECK_EQUAL(held[0].type(), "A");
  BOOST_CHECK_EQUAL(held[0].count(), 500);
  auto due = t0 + held_for;
  BOOST_CHECK(e.ask_for_sample(due));
  // A sample with no finished task in it is held as well.
  BOOST_CHECK(e.answer(found::sampled, {}, due).empty());
  BOOST_CHECK(!e.ask_for_sample(due + std::chrono::seconds{1}));
}

BOOST_AUTO_TEST_CASE(one_call_at_a_time_asks_for_a_sample_while_one_is_held) {
  // Nothing held: every call asks, or it would have nothing to answer with.
  BOOST_CHECK(e.ask_for_sample(t0));
  BOOST_CHECK(e.ask_for_sample(t0));
  e.answer(found::sampled, {finished("A", 500, true)}, t0);
  auto due = t0 + held_for;
  BOOST_CHECK(e.ask_for_sample(due));
  // Calls while that sample is on its way answer with the one held.
  BOOST_CHECK(!e.ask_for_sample(due + std::chrono::seconds{1}));
  BOOST_CHECK(!e.ask_for_sample(due + held_for - std::chrono::milliseconds{1}));
  // One that never came back (its call failed) is asked for again.
  BOOST_CHECK(e.ask_for_sample(due + held_for));
}

BOOST_AUTO_TEST_CASE(a_count_is_never_held_and_ends_the_estimate) {
  e.answer(found::sampled, {finished("A", 500, true)}, t0);
  auto counted = e.answer(found::counted, {finished("B", 7, false)}, t0);
  BOOST_REQUIRE_EQUAL(counted.size(), 1u);
  BOOST_CHECK_EQUAL(counted[0].type(), "B");
  // The table shrank: the next call asks for a sample, should it grow again.
  BOOST_CHECK(e.ask_for_sample(t0 + std::chrono::milliseconds{1}));
  // A call that asked while the estimate was held, answered after the count.
  auto late = e.answer(found::not_sampled, {}, t0);
  BOOST_REQUIRE_EQUAL(late.size(), 1u);
  BOOST_CHECK_EQUAL(late[0].type(), "A");
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

// A cancel is done once its executor heard it or knows nothing of the
// attempt; anything else, no answer included, sends it again.
BOOST_AUTO_TEST_CASE(an_http_executor_hears_a_cancel_by_2xx_404_or_410) {
  for (int status : {200, 202, 204, 404, 410})
    BOOST_CHECK_MESSAGE(cancel_heard(answer(status)), status);
  for (int status : {0, 301, 400, 409, 429, 500, 503})
    BOOST_CHECK_MESSAGE(!cancel_heard(answer(status)), status);
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

BOOST_AUTO_TEST_CASE(an_execution_body_carries_the_task_and_its_payload_as_stored) {
  auto task = task_with(R"({"a": [1, "\u00e9\"x"], "n": null})");
  task.set_key("k\"1\n");
  task.set_version(3);
  task.set_trace_id("4bf92f3577b34da6a3ce929d0e0e4736");
  auto body = nlohmann::json::parse(json::encode_execution(task));
  BOOST_CHECK_EQUAL(body.size(), 10u);
  BOOST_CHECK_EQUAL(body["id"], 7);
  BOOST_CHECK_EQUAL(body["type"], "T");
  BOOST_CHECK_EQUAL(body["key"], "k\"1\n");
  BOOST_CHECK_EQUAL(body["version"], 3);
  BOOST_CHECK_EQUAL(body["attempt"], 2);
  BOOST_CHECK_EQUAL(body["payload"], nlohmann::json::parse(task.payload()));
  BOOST_CHECK(body["batch"].is_null());
  BOOST_CHECK(body["shard_index"].is_null());
  BOOST_CHECK(body["shard_total"].is_null());
  BOOST_CHECK_EQUAL(body["trace_id"], task.trace_id());

  task.set_payload("");
  task.set_batch("nightly");
  task.set_shard_index(0);
  task.set_shard_total(4);
  body = nlohmann::json::parse(json::encode_execution(task));
  BOOST_CHECK(body["payload"].is_null());
  BOOST_CHECK_EQUAL(body["batch"], "nightly");
  BOOST_CHECK_EQUAL(body["shard_index"], 0);
  BOOST_CHECK_EQUAL(body["shard_total"], 4);
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

BOOST_AUTO_TEST_SUITE(cron_schedules)

namespace {

cron::seconds_time utc(const std::string& rfc3339) {
  auto micros = parse_rfc3339(rfc3339);
  BOOST_REQUIRE_MESSAGE(micros, rfc3339);
  return cron::seconds_time{std::chrono::seconds{*micros / 1'000'000}};
}

std::string text(cron::seconds_time t) {
  return format_rfc3339(t.time_since_epoch().count() * 1'000'000);
}

/// The next `n` fire times of `expression` in `zone` after `after`.
std::vector<std::string> fires(const std::string& expression, const std::string& zone,
                               const std::string& after, int n = 1,
                               const std::string& anchor = "1970-01-01T00:00:00Z",
                               cron::dialect dialect = cron::dialect::unix_cron) {
  auto s = cron::parse(expression, dialect);
  BOOST_REQUIRE_MESSAGE(s, expression << ": " << (s ? "" : error_of(s.error())));
  auto z = cron::find_zone(zone);
  BOOST_REQUIRE_MESSAGE(z, zone);
  std::vector<std::string> out;
  for (auto t : cron::next_times(*s, *z, utc(after), n, utc(anchor))) out.push_back(text(t));
  return out;
}

using times = std::vector<std::string>;

std::string joined(const times& t) {
  std::string out;
  for (const auto& x : t) out += (out.empty() ? "" : " ") + x;
  return out;
}

}  // namespace

// Expected times worked out by hand from the calendar (2026-01-01 is a
// Thursday) and the zones' 2026 transitions: New York springs forward on
// March 8 at 02:00 EST (07:00Z) and falls back on November 1 at 02:00 EDT
// (06:00Z); Berlin on March 29 at 02:00 CET (01:00Z) and October 25 at
// 03:00 CEST (01:00Z).
BOOST_AUTO_TEST_CASE(fields_lists_ranges_steps_and_names) {
  struct row {
    const char* expression;
    const char* after;
    times expected;
  };
  const row table[] = {
      {"*/15 * * * *", "2026-01-01T00:07:00Z", {"2026-01-01T00:15:00Z", "2026-01-01T00:30:00Z"}},
      {"5,10-12 3 * * *",
       "2026-01-01T00:00:00Z",
       {"2026-01-01T03:05:00Z", "2026-01-01T03:10:00Z", "2026-01-01T03:11:00Z",
        "2026-01-01T03:12:00Z", "2026-01-02T03:05:00Z"}},
      {"10-50/20 * * * *",
       "2026-01-01T00:00:00Z",
       {"2026-01-01T00:10:00Z", "2026-01-01T00:30:00Z", "2026-01-01T00:50:00Z",
        "2026-01-01T01:10:00Z"}},
      {"7/20 0 * * *",
       "2026-01-01T00:00:00Z",
       {"2026-01-01T00:07:00Z", "2026-01-01T00:27:00Z", "2026-01-01T00:47:00Z",
        "2026-01-02T00:07:00Z"}},
      // Six fields: seconds first.
      {"*/10 * * * * *", "2026-01-01T00:00:05Z", {"2026-01-01T00:00:10Z", "2026-01-01T00:00:20Z"}},
      {"30 0 12 ? * WED", "2026-01-01T00:00:00Z", {"2026-01-07T12:00:30Z", "2026-01-14T12:00:30Z"}},
      // Names, either case; 7 is Sunday too.
      {"0 0 * jan,Jul SUN",
       "2026-01-20T00:00:00Z",
       {"2026-01-25T00:00:00Z", "2026-07-05T00:00:00Z"}},
      {"0 0 * * 7", "2026-01-01T00:00:00Z", {"2026-01-04T00:00:00Z"}},
      {"0 0 * * MON-FRI", "2026-01-02T12:00:00Z", {"2026-01-05T00:00:00Z", "2026-01-06T00:00:00Z"}},
      // Day of month and day of week both restricted: either one.
      {"0 0 13 * FRI",
       "2026-01-01T00:00:00Z",
       {"2026-01-02T00:00:00Z", "2026-01-09T00:00:00Z", "2026-01-13T00:00:00Z",
        "2026-01-16T00:00:00Z"}},
      // Macros.
      {"@hourly", "2026-01-01T00:00:00Z", {"2026-01-01T01:00:00Z"}},
      {"@daily", "2026-01-01T00:00:00Z", {"2026-01-02T00:00:00Z"}},
      {"@weekly", "2026-01-01T00:00:00Z", {"2026-01-04T00:00:00Z"}},
      {"@monthly", "2026-01-01T00:00:00Z", {"2026-02-01T00:00:00Z"}},
      {"@yearly", "2026-01-01T00:00:00Z", {"2027-01-01T00:00:00Z"}},
  };
  for (const auto& r : table) BOOST_TEST_CONTEXT(r.expression) {
      BOOST_CHECK_EQUAL(
          joined(fires(r.expression, "UTC", r.after, static_cast<int>(r.expected.size()))),
          joined(r.expected));
    }
}

BOOST_AUTO_TEST_CASE(leap_years_last_days_weekdays_and_nth_weekdays) {
  struct row {
    const char* expression;
    const char* after;
    times expected;
  };
  const row table[] = {
      // Feb 29 only in leap years, and 2100 is none.
      {"0 0 29 2 *", "2026-03-01T00:00:00Z", {"2028-02-29T00:00:00Z", "2032-02-29T00:00:00Z"}},
      {"0 0 29 2 *", "2096-03-01T00:00:00Z", {"2104-02-29T00:00:00Z"}},
      // L: the last day.
      {"0 12 L * *",
       "2026-02-01T00:00:00Z",
       {"2026-02-28T12:00:00Z", "2026-03-31T12:00:00Z", "2026-04-30T12:00:00Z"}},
      {"0 12 L 2 *", "2027-03-01T00:00:00Z", {"2028-02-29T12:00:00Z"}},
      // LW: the last weekday (May 31, 2026 is a Sunday; Oct 31 a Saturday).
      {"0 0 LW 5,10 *", "2026-01-01T00:00:00Z", {"2026-05-29T00:00:00Z", "2026-10-30T00:00:00Z"}},
      // nW: the nearest weekday, never outside the month. Aug 15, 2026 is a
      // Saturday, Nov 15 a Sunday, Aug 1 a Saturday, Jan 31, 2027 a Sunday.
      {"0 9 15W 8,11 *", "2026-01-01T00:00:00Z", {"2026-08-14T09:00:00Z", "2026-11-16T09:00:00Z"}},
      {"0 9 1W 8 *", "2026-01-01T00:00:00Z", {"2026-08-03T09:00:00Z"}},
      {"0 9 31W 1 *", "2026-02-01T00:00:00Z", {"2027-01-29T09:00:00Z"}},
      // 5L: the last Friday; 5#3 the third; 1#5 a fifth Monday, which
      // January and February 2026 lack.
      {"0 0 * * 5L", "2026-02-01T00:00:00Z", {"2026-02-27T00:00:00Z", "2026-03-27T00:00:00Z"}},
      {"0 0 ? * 5#3", "2026-01-01T00:00:00Z", {"2026-01-16T00:00:00Z", "2026-02-20T00:00:00Z"}},
      {"0 0 * * MON#5", "2026-01-01T00:00:00Z", {"2026-03-30T00:00:00Z"}},
  };
  for (const auto& r : table) BOOST_TEST_CONTEXT(r.expression << " after " << r.after) {
      BOOST_CHECK_EQUAL(
          joined(fires(r.expression, "UTC", r.after, static_cast<int>(r.expected.size()))),
          joined(r.expected));
    }
  auto never = cron::parse("0 0 30 2 *", cron::dialect::unix_cron);
  BOOST_REQUIRE(never);
  BOOST_CHECK(!cron::next_after(*never, *cron::find_zone("UTC"), utc("2026-01-01T00:00:00Z")));
}

BOOST_AUTO_TEST_CASE(daylight_saving_gaps_fire_after_them_and_overlaps_once) {
  struct row {
    const char* expression;
    const char* zone;
    const char* after;
    times expected;
  };
  const row table[] = {
      // 02:30 does not exist on March 8 in New York: the first instant after
      // the gap (03:00 EDT), then 02:30 EDT.
      {"30 2 * * *",
       "America/New_York",
       "2026-03-07T12:00:00Z",
       {"2026-03-08T07:00:00Z", "2026-03-09T06:30:00Z"}},
      // Every minute through the gap: 01:59 EST, then 03:00 EDT once.
      {"* * * * *",
       "America/New_York",
       "2026-03-08T06:58:30Z",
       {"2026-03-08T06:59:00Z", "2026-03-08T07:00:00Z", "2026-03-08T07:01:00Z"}},
      // 01:30 happens twice on November 1: only the first (EDT) fires.
      {"30 1 * * *",
       "America/New_York",
       "2026-10-31T12:00:00Z",
       {"2026-11-01T05:30:00Z", "2026-11-02T06:30:00Z"}},
      // Hourly through the overlap: 01:00 EDT, not 01:00 EST, then 02:00 EST.
      {"0 * * * *",
       "America/New_York",
       "2026-11-01T04:30:00Z",
       {"2026-11-01T05:00:00Z", "2026-11-01T07:00:00Z"}},
      // Asked during the second pass, the next is after it.
      {"*/20 * * * *", "America/New_York", "2026-11-01T06:30:00Z", {"2026-11-01T07:00:00Z"}},
      {"30 2 * * *",
       "Europe/Berlin",
       "2026-03-28T12:00:00Z",
       {"2026-03-29T01:00:00Z", "2026-03-30T00:30:00Z"}},
      {"30 2 * * *",
       "Europe/Berlin",
       "2026-10-24T12:00:00Z",
       {"2026-10-25T00:30:00Z", "2026-10-26T01:30:00Z"}},
      {"0 9 * * *", "Europe/Berlin", "2026-01-01T00:00:00Z", {"2026-01-01T08:00:00Z"}},
  };
  for (const auto& r : table)
    BOOST_TEST_CONTEXT(r.expression << " in " << r.zone << " after " << r.after) {
      BOOST_CHECK_EQUAL(
          joined(fires(r.expression, r.zone, r.after, static_cast<int>(r.expected.size()))),
          joined(r.expected));
    }
}

BOOST_AUTO_TEST_CASE(every_fires_at_a_fixed_rate_from_its_anchor) {
  BOOST_CHECK((fires("@every 90s", "UTC", "2026-01-01T00:02:00Z", 2, "2026-01-01T00:00:00Z") ==
               times{"2026-01-01T00:03:00Z", "2026-01-01T00:04:30Z"}));
  BOOST_CHECK((fires("@every 1h30m", "UTC", "2026-01-01T00:00:00Z", 1, "2026-01-01T00:00:00Z") ==
               times{"2026-01-01T01:30:00Z"}));
  BOOST_CHECK((fires("@every 1d", "UTC", "2025-12-01T00:00:00Z", 1, "2026-01-01T10:00:00Z") ==
               times{"2026-01-01T10:00:00Z"}));
}

// Quartz and XXL-JOB count Sunday as 1: pasted in as unix cron, "6#3" (the
// third Friday there) fires on the third Saturday. In January 2026 the
// Fridays are the 2nd, 9th, 16th, 23rd and 30th.
BOOST_AUTO_TEST_CASE(quartz_counts_sunday_as_one_and_unix_as_zero) {
  struct row {
    const char* expression;
    cron::dialect dialect;
    times expected;
  };
  using enum cron::dialect;
  const row table[] = {
      {"0 0 9 ? * 6#3", quartz, {"2026-01-16T09:00:00Z"}},
      {"0 0 9 ? * 6#3", unix_cron, {"2026-01-17T09:00:00Z"}},
      {"0 0 9 ? * 1", quartz, {"2026-01-04T09:00:00Z"}},
      {"0 0 9 ? * 1", unix_cron, {"2026-01-05T09:00:00Z"}},
      {"0 0 9 ? * 2-6", quartz, {"2026-01-01T09:00:00Z", "2026-01-02T09:00:00Z"}},
      {"0 0 9 ? * 1,7", quartz, {"2026-01-03T09:00:00Z", "2026-01-04T09:00:00Z"}},
      {"0 0 9 ? * 7L", quartz, {"2026-01-31T09:00:00Z"}},
      {"0 0 9 ? * */2", quartz, {"2026-01-01T09:00:00Z", "2026-01-03T09:00:00Z"}},
      {"0 0 9 ? * SUN", quartz, {"2026-01-04T09:00:00Z"}},
      {"0 0 9 ? * FRI#3", quartz, {"2026-01-16T09:00:00Z"}},
      // A macro means the same in both.
      {"@weekly", quartz, {"2026-01-04T00:00:00Z"}},
  };
  for (const auto& r : table)
    BOOST_TEST_CONTEXT(r.expression << (r.dialect == quartz ? " (quartz)" : " (unix)")) {
      BOOST_CHECK_EQUAL(
          joined(fires(r.expression, "UTC", "2026-01-01T00:00:00Z",
                       static_cast<int>(r.expected.size()), "1970-01-01T00:00:00Z", r.dialect)),
          joined(r.expected));
    }
}

BOOST_AUTO_TEST_CASE(bad_schedules_and_zones_name_the_field_and_token) {
  struct row {
    const char* expression;
    std::vector<const char*> says;
  };
  const row table[] = {
      {"61 * * * *", {"\"61\"", "minute field", "between 0 and 59"}},
      {"0 24 * * *", {"\"24\"", "hour field"}},
      {"0 0 32 * *", {"\"32\"", "day-of-month field"}},
      {"0 0 * FOO *", {"\"FOO\"", "month field"}},
      {"0 0 * * 5#6", {"\"5#6\"", "day-of-week field"}},
      {"0 0 * * XL", {"\"XL\"", "day-of-week field"}},
      {"0 0 XW * *", {"\"XW\"", "day-of-month field"}},
      {"*/0 * * * *", {"\"*/0\"", "minute field", "step"}},
      {"30-10 * * * *", {"\"30-10\"", "ends before it starts"}},
      {"* * * *", {"5 fields", "got 4"}},
      {"* * * * * * *", {"got 7"}},
      {"@sometimes", {"\"@sometimes\""}},
      {"@every 0s", {"\"0s\"", "@every"}},
      {"@every soon", {"\"soon\""}},
      {"", {"empty"}},
  };
  for (const auto& r : table) {
    auto parsed = cron::parse(r.expression, cron::dialect::unix_cron);
    BOOST_TEST_CONTEXT(r.expression) {
      BOOST_REQUIRE(!parsed);
      auto message = error_message(parsed.error());
      BOOST_CHECK_MESSAGE(message.rfind("schedule: ", 0) == 0, message);
      for (auto part : r.says)
        BOOST_CHECK_MESSAGE(message.find(part) != std::string::npos, message);
    }
  }
  auto quartz = cron::parse("0 0 9 ? * 0", cron::dialect::quartz);
  BOOST_REQUIRE(!quartz);
  BOOST_CHECK_EQUAL(error_message(quartz.error()),
                    "schedule: \"0\" in the day-of-week field is not between 1 and 7");
  auto unknown = cron::parse("0 0 * * *", "cron");
  BOOST_REQUIRE(!unknown);
  BOOST_CHECK_EQUAL(error_message(unknown.error()),
                    "dialect must be one of unix, quartz (got \"cron\")");
  auto zone = cron::find_zone("Mars/Olympus_Mons");
  BOOST_REQUIRE(!zone);
  BOOST_CHECK_EQUAL(error_message(zone.error()),
                    "time_zone: \"Mars/Olympus_Mons\" is not an IANA time zone name");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(firing_plans)

namespace {

int64_t us(const std::string& rfc3339) {
  auto micros = parse_rfc3339(rfc3339);
  BOOST_REQUIRE_MESSAGE(micros, rfc3339);
  return *micros;
}

pb::DueJob every_minute(const std::string& misfire, const std::string& next) {
  pb::DueJob job;
  job.set_name("j");
  job.set_schedule("* * * * *");
  job.set_time_zone("UTC");
  job.set_misfire(misfire);
  job.set_catch_up_limit(2);
  job.set_next_fire_at_us(us(next));
  job.set_anchor_at_us(us("2026-01-01T00:00:00Z"));
  return job;
}

/// "kind:fired" or "kind:missed" per firing, at minutes past midnight.
std::string summary(const pb::JobPlan& plan) {
  std::string out;
  for (const auto& f : plan.firings()) {
    auto minute = (f.fire_at_us() - us("2026-01-01T00:00:00Z")) / 60'000'000;
    out += (out.empty() ? "" : " ") + std::to_string(minute) + ":" + f.kind() +
           (f.missed() ? ":missed" : ":fired");
  }
  return out;
}

}  // namespace

BOOST_AUTO_TEST_CASE(on_time_fire_times_fire_and_the_next_one_is_set) {
  auto plan =
      plan_firings(every_minute("skip", "2026-01-01T00:01:00Z"), us("2026-01-01T00:01:30Z"));
  BOOST_REQUIRE(plan);
  BOOST_CHECK_EQUAL(summary(*plan), "1:scheduled:fired");
  BOOST_CHECK_EQUAL(plan->expected_next_us(), us("2026-01-01T00:01:00Z"));
  BOOST_CHECK_EQUAL(plan->new_next_us(), us("2026-01-01T00:02:00Z"));
}

BOOST_AUTO_TEST_CASE(missed_fire_times_follow_the_policy) {
  // Due: minutes 0 to 5 at 00:05:30; 0 to 4 are more than 60 s late.
  auto at = us("2026-01-01T00:05:30Z");
  auto skip = plan_firings(every_minute("skip", "2026-01-01T00:00:00Z"), at);
  BOOST_CHECK_EQUAL(summary(*skip),
                    "0:scheduled:missed 1:scheduled:missed 2:scheduled:missed 3:scheduled:missed "
                    "4:scheduled:missed 5:scheduled:fired");
  auto once = plan_firings(every_minute("fire_once", "2026-01-01T00:00:00Z"), at);
  BOOST_CHECK_EQUAL(summary(*once),
                    "0:scheduled:missed 1:scheduled:missed 2:scheduled:missed 3:scheduled:missed "
                    "4:fire_once:fired 5:scheduled:fired");
  auto catch_up = plan_firings(every_minute("catch_up", "2026-01-01T00:00:00Z"), at);
  BOOST_CHECK_EQUAL(summary(*catch_up),
                    "0:catch_up:fired 1:catch_up:fired 2:scheduled:missed 3:scheduled:missed "
                    "4:scheduled:missed 5:scheduled:fired");
  BOOST_CHECK_EQUAL(catch_up->new_next_us(), us("2026-01-01T00:06:00Z"));
}

BOOST_AUTO_TEST_CASE(a_long_outage_plans_only_its_newest_fire_times) {
  auto job = every_minute("skip", "2026-01-01T00:00:00Z");
  job.set_schedule("* * * * * *");
  auto plan = plan_firings(job, us("2026-01-01T02:00:00Z"), misfire_rules{60s, 100});
  BOOST_REQUIRE(plan);
  BOOST_REQUIRE_EQUAL(plan->firings_size(), 100);
  BOOST_CHECK_EQUAL(plan->firings(99).fire_at_us(), us("2026-01-01T02:00:00Z"));
  BOOST_CHECK_EQUAL(plan->new_next_us(), us("2026-01-01T02:00:01Z"));
}

BOOST_AUTO_TEST_CASE(a_schedule_that_no_longer_parses_is_an_error) {
  auto job = every_minute("skip", "2026-01-01T00:00:00Z");
  job.set_time_zone("Gone/Zone");
  BOOST_CHECK(!plan_firings(job, us("2026-01-01T00:00:30Z")));
}

// A leader plans in the job's dialect: after the third Friday of January
// 2026 (the 16th) a quartz "6#3" fires next on February's (the 20th); read
// as unix cron, on the third Saturday, the next day.
BOOST_AUTO_TEST_CASE(the_next_fire_time_is_read_in_the_jobs_dialect) {
  auto job = every_minute("skip", "2026-01-16T09:00:00Z");
  job.set_schedule("0 0 9 ? * 6#3");
  for (auto [dialect, next] :
       {std::pair{"quartz", "2026-02-20T09:00:00Z"}, std::pair{"unix", "2026-01-17T09:00:00Z"}})
    BOOST_TEST_CONTEXT(dialect) {
      job.set_dialect(dialect);
      auto plan = plan_firings(job, us("2026-01-16T09:00:01Z"));
      BOOST_REQUIRE(plan);
      BOOST_CHECK_EQUAL(plan->new_next_us(), us(next));
    }
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(cluster_port)

BOOST_AUTO_TEST_CASE(refusals_are_logged_once_per_interval_for_each_address_and_reason) {
  using namespace std::chrono_literals;
  refusal_log log{60s, 2};
  refusal_log::clock::time_point t0{};
  BOOST_CHECK(log.record("10.0.0.1", "wrong_ca", t0) == 0);
  // Another reason is a line of its own.
  BOOST_CHECK(log.record("10.0.0.1", "not_tls", t0 + 1s) == 0);
  // Full: addresses not remembered share one entry, and are still logged.
  BOOST_CHECK(log.record("10.0.0.2", "wrong_ca", t0 + 2s) == 0);
  BOOST_CHECK(!log.record("10.0.0.3", "wrong_ca", t0 + 3s));
  for (int i = 2; i <= 59; ++i) BOOST_CHECK(!log.record("10.0.0.1", "wrong_ca", t0 + i * 1s));
  // A minute after the first line: one more, with what went unlogged.
  BOOST_CHECK(log.record("10.0.0.1", "wrong_ca", t0 + 60s) == 58);
  BOOST_CHECK(!log.record("10.0.0.1", "wrong_ca", t0 + 61s));
  BOOST_CHECK(log.record("10.0.0.1", "wrong_ca", t0 + 130s) == 1);
  // Still full: a new reason from new addresses gets its shared entry too.
  BOOST_CHECK(log.record("10.0.0.4", "bad_proof", t0 + 131s) == 0);
  BOOST_CHECK(!log.record("10.0.0.4", "bad_proof", t0 + 132s));
  BOOST_CHECK(!log.record("10.0.0.5", "bad_proof", t0 + 133s));
}

BOOST_AUTO_TEST_CASE(openssl_calls_of_caf_go_through_the_error_queue_guard) {
  BOOST_CHECK(tls_error_queue_guarded());
  BOOST_CHECK(cluster_frames_checked());
}

namespace {

std::vector<unsigned char> basp_header(unsigned char operation, uint32_t payload) {
  std::vector<unsigned char> h(basp_frame_check::header_size, 0);
  h[0] = operation;
  for (int i = 0; i < 4; ++i) h[4 + i] = static_cast<unsigned char>(payload >> (24 - 8 * i));
  return h;
}

}  // namespace

BOOST_AUTO_TEST_CASE(frames_pass_in_any_slicing_until_one_is_unknown_or_too_long) {
  // Three sound frames (a handshake with a payload, a heartbeat, a message),
  // fed in every chunk size from one byte to all at once.
  std::vector<unsigned char> stream;
  for (auto [op, len] : {std::pair{1, 100u}, {6, 0u}, {2, 1000u}}) {
    auto h = basp_header(static_cast<unsigned char>(op), len);
    stream.insert(stream.end(), h.begin(), h.end());
    stream.insert(stream.end(), len, 0xff);
  }
  for (size_t chunk = 1; chunk <= stream.size(); chunk += 7) {
    basp_frame_check check{1000};
    for (size_t at = 0; at < stream.size(); at += chunk)
      BOOST_REQUIRE(!check.take(stream.data() + at, std::min(chunk, stream.size() - at)));
    // The payload bytes (0xff) were not read as a header: the next one is.
    auto next = basp_header(7, 0);
    auto verdict = check.take(next.data(), next.size());
    BOOST_REQUIRE(verdict);
    BOOST_CHECK_EQUAL(verdict->first, "bad_frame");
  }
  basp_frame_check check{1000};
  auto too_long = basp_header(1, 1001);
  auto verdict = check.take(too_long.data(), 31);
  BOOST_CHECK(!verdict);
  verdict = check.take(too_long.data() + 31, 1);
  BOOST_REQUIRE(verdict);
  BOOST_CHECK_EQUAL(verdict->first, "oversized_frame");
  BOOST_CHECK(verdict->second.find("1001") != std::string::npos);
  BOOST_CHECK(verdict->second.find("api.max_payload_bytes") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(the_frame_bound_follows_the_payload_bound_and_stays_in_32_bits) {
  BOOST_CHECK_EQUAL(max_frame_payload(1 << 20), 5u << 20);
  BOOST_CHECK_EQUAL(max_frame_payload(int64_t{1} << 30), UINT32_MAX);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(browser_guard)

namespace {

http_request request(std::string method, std::vector<std::pair<std::string, std::string>> headers,
                     std::string body = "") {
  http_request r;
  r.method = std::move(method);
  r.target = "/v1/tasks";
  r.headers = std::move(headers);
  r.content_type = r.header("content-type");
  r.body = std::move(body);
  return r;
}

/// The HTTP status the API answers a refusal with, 0 for none.
int refused_with(const http_request& r, const browser_policy& p = {}) {
  auto refusal = refuse_foreign_request(r, p);
  if (!refusal) refusal = refuse_content_type(r);
  if (!refusal) return 0;
  switch (refusal->code) {
    case errc::misdirected:
      return 421;
    case errc::forbidden:
      return 403;
    case errc::unsupported_media_type:
      return 415;
    default:
      return -1;
  }
}

}  // namespace

BOOST_AUTO_TEST_CASE(the_host_must_name_the_node) {
  for (const auto* host : {"127.0.0.1:8480", "127.0.0.1", "localhost:8480", "LOCALHOST",
                           "[::1]:8480", "10.1.2.3:80", "[fe80::1]", ""})
    BOOST_CHECK_MESSAGE(refused_with(request("GET", {{"host", host}})) == 0, host);
  for (const auto* host : {"attacker.example:8480", "attacker.example", "127.0.0.1.nip.io",
                           "localhost.attacker.example", "0x7f000001.example:8480"})
    BOOST_CHECK_MESSAGE(refused_with(request("GET", {{"host", host}})) == 421, host);
  auto refusal = refuse_foreign_request(request("GET", {{"host", "evil.example"}}), {});
  BOOST_REQUIRE(refusal);
  BOOST_CHECK(refusal->message.find("Host header") != std::string::npos);
  BOOST_CHECK(refusal->message.find("api.allowed_hosts") != std::string::npos);
  browser_policy behind_proxy{{"Tasks.Example.Com"}, {}};
  BOOST_CHECK_EQUAL(refused_with(request("GET", {{"host", "tasks.example.com"}}), behind_proxy), 0);
  BOOST_CHECK_EQUAL(refused_with(request("GET", {{"host", "other.example.com"}}), behind_proxy),
                    421);
}

BOOST_AUTO_TEST_CASE(an_origin_other_than_the_nodes_own_or_a_listed_one_is_refused) {
  auto get = [](const char* host, const char* origin) {
    return request("GET", {{"host", host}, {"origin", origin}});
  };
  BOOST_CHECK_EQUAL(refused_with(get("127.0.0.1:8480", "http://127.0.0.1:8480")), 0);
  BOOST_CHECK_EQUAL(refused_with(get("localhost", "http://LOCALHOST:80")), 0);
  // Behind a reverse proxy that ends TLS.
  browser_policy proxy{{"tasks.example.com"}, {}};
  BOOST_CHECK_EQUAL(refused_with(get("tasks.example.com", "https://tasks.example.com"), proxy), 0);
  BOOST_CHECK_EQUAL(refused_with(get("127.0.0.1:8480", "http://127.0.0.1:9999")), 403);
  BOOST_CHECK_EQUAL(refused_with(get("127.0.0.1:8480", "http://attacker.example")), 403);
  BOOST_CHECK_EQUAL(refused_with(get("127.0.0.1:8480", "null")), 403);
  BOOST_CHECK_EQUAL(refused_with(get("127.0.0.1:8480", "file://")), 403);
  browser_policy listed{{}, {"https://Dashboard.Example.com:443", "http://127.0.0.1:3000"}};
  BOOST_CHECK_EQUAL(refused_with(get("127.0.0.1:8480", "https://dashboard.example.com"), listed),
                    0);
  BOOST_CHECK_EQUAL(refused_with(get("127.0.0.1:8480", "http://127.0.0.1:3000"), listed), 0);
  BOOST_CHECK_EQUAL(refused_with(get("127.0.0.1:8480", "http://dashboard.example.com"), listed),
                    403);
}

BOOST_AUTO_TEST_CASE(changes_need_a_json_or_protobuf_content_type) {
  auto host = std::pair<std::string, std::string>{"host", "127.0.0.1:8480"};
  auto with_type = [&](const char* method, const char* type, std::string body = "{}") {
    std::vector<std::pair<std::string, std::string>> h{host};
    if (*type) h.emplace_back("content-type", type);
    return refused_with(request(method, h, std::move(body)));
  };
  BOOST_CHECK_EQUAL(with_type("POST", "application/json"), 0);
  BOOST_CHECK_EQUAL(with_type("POST", "Application/JSON; charset=utf-8"), 0);
  BOOST_CHECK_EQUAL(with_type("POST", "application/x-protobuf"), 0);
  BOOST_CHECK_EQUAL(with_type("POST", "application/json", ""), 0);
  for (const auto* method : {"POST", "PUT", "DELETE", "PATCH"}) {
    BOOST_CHECK_EQUAL(with_type(method, "text/plain"), 415);
    BOOST_CHECK_EQUAL(with_type(method, "application/x-www-form-urlencoded"), 415);
    BOOST_CHECK_EQUAL(with_type(method, "multipart/form-data; boundary=x"), 415);
    BOOST_CHECK_EQUAL(with_type(method, "", ""), 415);
  }
  BOOST_CHECK_EQUAL(with_type("POST", "application/jsonp"), 415);
  BOOST_CHECK_EQUAL(with_type("GET", "", ""), 0);
  BOOST_CHECK_EQUAL(with_type("GET", "text/plain", "x"), 415);
  auto refusal = refuse_content_type(request("POST", {host, {"content-type", "text/plain"}}));
  BOOST_REQUIRE(refusal);
  BOOST_CHECK(refusal->message.find("Content-Type header") != std::string::npos);
  BOOST_CHECK(refusal->message.find("text/plain") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(answers_carry_the_protective_headers) {
  std::map<std::string, std::string> headers{protective_headers().begin(),
                                             protective_headers().end()};
  BOOST_CHECK(headers["Content-Security-Policy"].find("frame-ancestors 'none'") !=
              std::string::npos);
  BOOST_CHECK(headers["Content-Security-Policy"].find("script-src 'self'") != std::string::npos);
  BOOST_CHECK(headers["Content-Security-Policy"].find("unsafe-inline") == std::string::npos);
  BOOST_CHECK_EQUAL(headers["X-Content-Type-Options"], "nosniff");
  BOOST_CHECK_EQUAL(headers["Referrer-Policy"], "no-referrer");
}

BOOST_AUTO_TEST_SUITE_END()

// The harness's cut between two nodes: the proxy in front of one node's
// cluster port silences the connections another process dialled, and only
// those (tools/tcp_proxy.cpp).
BOOST_AUTO_TEST_SUITE(tcp_proxy_silence)

namespace {

int dial(const std::string& address) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(std::stoi(address.substr(address.rfind(':') + 1))));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

/// Sends one byte on `fd` and answers whether it comes back within `wait`.
bool echoed(int fd, char byte, std::chrono::milliseconds wait) {
  if (write(fd, &byte, 1) != 1) return false;
  pollfd p{fd, POLLIN, 0};
  char back = 0;
  return poll(&p, 1, static_cast<int>(wait.count())) == 1 && read(fd, &back, 1) == 1 &&
         back == byte;
}

/// Echoes what each connection sends, until the listener closes.
struct echo_server {
  echo_server() {
    listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    BOOST_REQUIRE(bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
                  listen(listener, 16) == 0 &&
                  getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
    port = ntohs(addr.sin_port);
    loop = std::thread{[this] {
      for (int fd; (fd = accept4(listener, nullptr, nullptr, SOCK_CLOEXEC)) >= 0;)
        workers.emplace_back([fd] {
          char c;
          while (read(fd, &c, 1) == 1 && write(fd, &c, 1) == 1) {
          }
          close(fd);
        });
    }};
  }
  ~echo_server() {
    shutdown(listener, SHUT_RDWR);
    close(listener);
    loop.join();
    for (auto& w : workers) w.detach();
  }
  int listener = -1;
  uint16_t port = 0;
  std::thread loop;
  std::vector<std::thread> workers;
};

}  // namespace

BOOST_AUTO_TEST_CASE(silence_for_one_process_leaves_the_others_connections_alone) {
  echo_server echo;
  tcp_proxy proxy{"127.0.0.1:" + std::to_string(echo.port)};
  int before = dial(proxy.address());
  BOOST_REQUIRE(before >= 0);
  BOOST_REQUIRE(echoed(before, 'a', 2s));

  proxy.go_silent_for(getpid());
  // Its connections, the open one and a new one, pass nothing.
  int during = dial(proxy.address());
  BOOST_REQUIRE(during >= 0);
  BOOST_CHECK(!echoed(before, 'b', 300ms));
  BOOST_CHECK(!echoed(during, 'c', 300ms));
  // Another process's pass as before.
  pid_t child = fork();
  if (child == 0) {
    int fd = dial(proxy.address());
    _exit(fd >= 0 && echoed(fd, 'x', 2s) ? 0 : 1);
  }
  int status = -1;
  waitpid(child, &status, 0);
  BOOST_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);

  // Restored, what was held comes through, in order, and nothing closed.
  proxy.restore_for(getpid());
  pollfd p{before, POLLIN, 0};
  char back = 0;
  BOOST_CHECK(poll(&p, 1, 2000) == 1 && read(before, &back, 1) == 1 && back == 'b');
  p.fd = during;
  BOOST_CHECK(poll(&p, 1, 2000) == 1 && read(during, &back, 1) == 1 && back == 'c');
  BOOST_CHECK(echoed(before, 'd', 2s));
  close(before);
  close(during);
}

BOOST_AUTO_TEST_SUITE_END()

// The API's route table is the document's list of operations: each route is
// documented, each documented operation routed, and the routes that answer
// without the token are those the document says need none.
BOOST_AUTO_TEST_SUITE(api_routes)

BOOST_AUTO_TEST_CASE(the_route_table_is_the_documents_operations) {
  std::ifstream in{std::string{TASKMILL_SOURCE_DIR} + "/messages/openapi.json"};
  auto doc = nlohmann::json::parse(in);
  std::set<std::string> documented, documented_open;
  for (const auto& [path, operations] : doc["paths"].items())
    for (const auto& [method, operation] : operations.items()) {
      if (method == "parameters") continue;
      auto upper = method;
      for (auto& ch : upper) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
      documented.insert(upper + " " + path);
      if (operation.contains("security") && operation["security"].empty())
        documented_open.insert(upper + " " + path);
    }
  std::set<std::string> routed, routed_open;
  for (const auto& e : api_endpoints()) {
    if (e.path.back() == '*') continue;  // the console's files
    routed.insert(e.method + " " + e.path);
    if (e.open) routed_open.insert(e.method + " " + e.path);
  }
  for (const auto& op : documented) BOOST_CHECK_MESSAGE(routed.count(op), op << " is not routed");
  for (const auto& op : routed)
    BOOST_CHECK_MESSAGE(documented.count(op), op << " is not documented");
  BOOST_CHECK(routed_open == documented_open);
  BOOST_CHECK_EQUAL(routed.size(), 40u);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(urls)

BOOST_AUTO_TEST_CASE(http_urls_are_taken_apart_once) {
  auto full = parse_http_url("http://10.0.0.5:9000/work?x=1");
  BOOST_REQUIRE(full);
  BOOST_CHECK_EQUAL(full->authority, "10.0.0.5:9000");
  BOOST_CHECK_EQUAL(full->host, "10.0.0.5");
  BOOST_CHECK_EQUAL(full->port, "9000");
  BOOST_CHECK_EQUAL(full->target, "/work?x=1");
  auto bare = parse_http_url("http://example.com");
  BOOST_REQUIRE(bare);
  BOOST_CHECK_EQUAL(bare->port, "80");
  BOOST_CHECK_EQUAL(bare->target, "/");
  auto target = parse_target("/v1/jobs/a%20b//next?count=3&q=x+y&flag");
  BOOST_CHECK_EQUAL(target.path.size(), 4u);
  BOOST_CHECK_EQUAL(target.path.at(2), "a b");
  BOOST_CHECK_EQUAL(target.query["count"], "3");
  BOOST_CHECK_EQUAL(target.query["q"], "x y");
  BOOST_CHECK(target.query.count("flag") && target.query["flag"].empty());
  for (const char* bad :
       {"https://example.com/", "http://", "http://:80/", "http://h:/x", "ftp://h/", "example.com"})
    BOOST_CHECK_MESSAGE(!parse_http_url(bad), bad);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(log_lines)

namespace {

std::string formatted(const log_format_options& options, spdlog::level::level_enum level,
                      std::string_view message) {
  spdlog::details::log_msg msg{"taskmill", level, message};
  spdlog::memory_buf_t out;
  make_log_formatter(options)->format(msg, out);
  return {out.data(), out.size()};
}

}  // namespace

BOOST_AUTO_TEST_CASE(json_lines_carry_the_actor_node_and_what_they_are_about) {
  log_format_options json{"json", "n1", false};
  auto line = formatted(json, spdlog::level::warn, "pusher: cannot claim: gone");
  BOOST_REQUIRE(line.ends_with("}\n"));
  auto j = nlohmann::json::parse(line);
  BOOST_CHECK_EQUAL(j["level"], "warning");
  BOOST_CHECK_EQUAL(j["node"], "n1");
  BOOST_CHECK_EQUAL(j["actor"], "pusher");
  BOOST_CHECK_EQUAL(j["message"], "cannot claim: gone");
  BOOST_CHECK(j["time"].get<std::string>().ends_with("Z"));
  BOOST_CHECK(!j.contains("task_id"));
  BOOST_CHECK(line.starts_with(R"({"time":)"));

  std::string job = "nightly";
  {
    log_scope attempt{log_fields::of_attempt(42, 3, "EMAIL")};
    auto a = nlohmann::json::parse(formatted(json, spdlog::level::info, "dispatcher: x"));
    BOOST_CHECK_EQUAL(a["task_id"], 42);
    BOOST_CHECK_EQUAL(a["attempt"], 3);
    BOOST_CHECK_EQUAL(a["type"], "EMAIL");
    log_scope inner{log_fields::of_job(job)};
    BOOST_CHECK_EQUAL(nlohmann::json::parse(formatted(json, spdlog::level::info, "cron: y"))["job"],
                      "nightly");
  }
  BOOST_CHECK(
      !nlohmann::json::parse(formatted(json, spdlog::level::info, "z")).contains("task_id"));

  // A node's own lines, lines of no actor, and bytes that are not UTF-8.
  BOOST_CHECK_EQUAL(
      nlohmann::json::parse(formatted(json, spdlog::level::info, "node n1: up"))["actor"], "node");
  auto bare = nlohmann::json::parse(formatted(json, spdlog::level::info, "Started: 3 of 4"));
  BOOST_CHECK(!bare.contains("actor"));
  BOOST_CHECK_EQUAL(bare["message"], "Started: 3 of 4");
  BOOST_CHECK_NO_THROW(nlohmann::json::parse(formatted(json, spdlog::level::info, "x: \xff\xfe")));
}

BOOST_AUTO_TEST_CASE(under_journald_lines_start_with_their_priority) {
  for (auto format : {"text", "json"}) {
    log_format_options journal{format, "n1", true};
    BOOST_CHECK(formatted(journal, spdlog::level::err, "a: b").starts_with("<3>"));
    BOOST_CHECK(formatted(journal, spdlog::level::warn, "a: b").starts_with("<4>"));
    BOOST_CHECK(formatted(journal, spdlog::level::info, "a: b").starts_with("<6>"));
    BOOST_CHECK(formatted(journal, spdlog::level::debug, "a: b").starts_with("<7>"));
    BOOST_CHECK(!formatted({format, "n1", false}, spdlog::level::err, "a: b").starts_with("<"));
  }
}

BOOST_AUTO_TEST_CASE(stderr_is_the_journal_only_where_journal_stream_names_it) {
  char path[] = "/tmp/taskmill-journal-XXXXXX";
  int fd = mkstemp(path);
  BOOST_REQUIRE(fd >= 0);
  struct stat st {};
  BOOST_REQUIRE(fstat(fd, &st) == 0);
  int saved = dup(2);
  dup2(fd, 2);
  setenv("JOURNAL_STREAM", (std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino)).c_str(),
         1);
  bool named = stderr_is_journal();
  setenv("JOURNAL_STREAM", "1:1", 1);
  bool other = stderr_is_journal();
  unsetenv("JOURNAL_STREAM");
  bool unset = stderr_is_journal();
  dup2(saved, 2);
  close(saved);
  close(fd);
  unlink(path);
  BOOST_CHECK(named);
  BOOST_CHECK(!other);
  BOOST_CHECK(!unset);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(config_reload)

namespace {

/// The effective config of `overrides`, as a node reads it again on SIGHUP.
std::string effective(const std::vector<std::string>& overrides) {
  std::string text;
  auto cfg = load_config("", overrides, &text, secrets::shown);
  if (!cfg) BOOST_FAIL(error_message(cfg.error()));
  return text;
}

using options = std::vector<std::string>;

}  // namespace

BOOST_AUTO_TEST_CASE(what_a_running_node_takes_and_what_needs_a_restart) {
  options base{"types.A.executor=noop",
               "types.A.running_limit=1",
               "types.A-bulk.executor=noop",
               "key_spaces.t.limit=2",
               "alerts.types.A.dead_task=true",
               "jobs=[{name = 'j', schedule = '* * * * *', "
               "type = 'A'}]"};
  auto before = effective(base);
  BOOST_CHECK(compare_configs(before, before, before).empty());
  auto with = [&](options more) {
    more.insert(more.begin(), base.begin(), base.end());
    return compare_configs(before, before, effective(more));
  };
  auto taken = [&](options more, options expected) {
    auto changes = with(std::move(more));
    BOOST_CHECK_EQUAL_COLLECTIONS(changes.taken.begin(), changes.taken.end(), expected.begin(),
                                  expected.end());
    BOOST_CHECK_MESSAGE(changes.need_restart.empty(), changes.need_restart.size() << " to restart");
  };
  auto restart = [&](options more, options expected) {
    auto changes = with(std::move(more));
    BOOST_CHECK_EQUAL_COLLECTIONS(changes.need_restart.begin(), changes.need_restart.end(),
                                  expected.begin(), expected.end());
    BOOST_CHECK_MESSAGE(changes.taken.empty(), changes.taken.size() << " taken");
  };
  taken({"types.A.running_limit=5"}, {"types.A.running_limit"});
  taken({"node.log_level=debug"}, {"node.log_level"});
  taken({"scheduling.global_limit=100"}, {"scheduling.global_limit"});
  taken({"defaults.max_retries=7"},
        {"defaults.max_retries", "types.A-bulk.max_retries", "types.A.max_retries"});
  taken({"key_spaces.t.limit=4"}, {"key_spaces.t.limit"});
  taken({"key_spaces.u.limit=4"}, {"key_spaces.u"});
  taken({"alerts.failure_rate=0.5"}, {"alerts.failure_rate"});
  taken({"alerts.types.A.dead_task=false"}, {"alerts.types.A.dead_task"});
  taken({"jobs=[{name = 'j', schedule = '0 * * * *', type = 'A'}]"}, {"jobs[j].schedule"});
  taken({"jobs=[{name = 'k', schedule = '* * * * *', type = 'A'}, {name = 'j', schedule = "
         "'* * * * *', type = 'A'}]"},
        {"jobs[k]"});
  restart({"types.A.executor=fail"}, {"types.A.executor"});
  restart({"types.B.executor=noop"}, {"types.B"});
  restart({"api.listen=127.0.0.1:9"}, {"api.listen", "node.name"});
  restart({"api.token=rotated"}, {"api.token"});
  restart({"database.url=postgresql://u:other@h/db"}, {"database.url"});
  restart({"alerts.webhooks=['http://h/x']"}, {"alerts.webhooks"});
  restart({"scheduling.batch_size=7"}, {"scheduling.batch_size"});

  // Gone from the file: the rules and limits are taken, jobs and key spaces
  // stay in the database.
  auto removed = compare_configs(
      before, before, effective({"types.A.executor=noop", "types.A-bulk.executor=noop"}));
  BOOST_CHECK((removed.taken == options{"alerts.types.A", "types.A.running_limit"}));
  BOOST_CHECK((removed.stay == options{"jobs[j]", "key_spaces.t"}));

  // What a restart takes is said at every reload until then; what was
  // taken, once.
  auto moved = effective({base[0], base[1], base[2], base[3], base[4], base[5],
                          "api.listen=127.0.0.1:9", "types.A.running_limit=3"});
  auto first = compare_configs(before, before, moved);
  BOOST_CHECK((first.taken == options{"types.A.running_limit"}));
  auto again = compare_configs(before, moved, moved);
  BOOST_CHECK(again.taken.empty());
  BOOST_CHECK((again.need_restart == options{"api.listen", "node.name"}));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(metric_labels)

namespace {

/// The distinct values of label `label` in the lines of `metric`.
std::set<std::string> label_values(const std::string& text, const std::string& metric,
                                   const std::string& label) {
  std::set<std::string> out;
  std::istringstream lines{text};
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(metric + "{", 0) != 0) continue;
    auto at = line.find(label + "=\"");
    if (at == std::string::npos) continue;
    at += label.size() + 2;
    out.insert(line.substr(at, line.find('"', at) - at));
  }
  return out;
}

}  // namespace

// A flood of task type and job names: at most metric_names_limit of each
// get series of their own, the rest share "(other)", nothing is lost.
BOOST_AUTO_TEST_CASE(a_flood_of_names_shares_one_other_series) {
  constexpr int names = 3 * static_cast<int>(metric_names_limit) / 2;
  node_metrics node;
  for (int i = 0; i < names; ++i) node.of_type("t" + std::to_string(i)).succeeded.Increment();
  node.of_type("t0").succeeded.Increment();
  auto own = label_values(node.render(), "taskmill_task_outcomes_total", "type");
  BOOST_CHECK_EQUAL(own.size(), metric_names_limit + 1);
  BOOST_CHECK(own.count("(other)"));
  double succeeded = 0;
  for (int i = 0; i < names; ++i)
    succeeded += node.of_type("t" + std::to_string(i)).succeeded.Value();
  BOOST_CHECK_EQUAL(node.of_type("t0").succeeded.Value(), 2);
  BOOST_CHECK_EQUAL(node.of_type("t" + std::to_string(names - 1)).succeeded.Value(),
                    names - static_cast<int>(metric_names_limit));

  pb::Stats live;
  for (int i = 0; i < names; ++i) {
    auto& c = *live.add_counts();
    c.set_type("t" + std::to_string(i));
    c.set_status(pb::PENDING);
    c.set_count(i + 1);
  }
  auto text = render_live_metrics(live);
  auto types = label_values(text, "taskmill_tasks", "type");
  BOOST_CHECK_EQUAL(types.size(), metric_names_limit + 1);
  // The types with most tasks keep their names; the others sum up.
  BOOST_CHECK(types.count("t" + std::to_string(names - 1)));
  BOOST_CHECK(!types.count("t0"));
  auto fewest = names - static_cast<int>(metric_names_limit);
  BOOST_CHECK_MESSAGE(text.find("taskmill_tasks{status=\"pending\",type=\"(other)\"} " +
                                std::to_string(fewest * (fewest + 1) / 2)) != std::string::npos,
                      text.substr(0, 400));

  pb::JobMetrics jobs;
  for (int i = 0; i < names; ++i) {
    auto& j = *jobs.add_jobs();
    j.set_job("j" + std::to_string(1000 + i));
    (*j.mutable_firings())["fired"] = 1;
    j.set_last_fired_us(1);
  }
  auto job_text = render_job_metrics(jobs);
  BOOST_CHECK_EQUAL(label_values(job_text, "taskmill_job_firings_total", "job").size(),
                    metric_names_limit + 1);
  BOOST_CHECK_EQUAL(label_values(job_text, "taskmill_job_last_fired_seconds", "job").size(),
                    metric_names_limit);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(lock_table)

BOOST_AUTO_TEST_CASE(a_lock_table_short_of_a_few_largest_batches_is_named_with_the_setting) {
  // PostgreSQL's defaults: 64 locks a session, 100 sessions.
  auto defaults = db::lock_table_shortfall(64, 100);
  BOOST_REQUIRE(defaults);
  BOOST_CHECK_MESSAGE(defaults->find("holds 6400 locks") != std::string::npos, *defaults);
  BOOST_CHECK_MESSAGE(
      defaults->find("max_locks_per_transaction to 400 or more") != std::string::npos, *defaults);
  auto just_short = db::lock_table_shortfall(199, 200);
  BOOST_REQUIRE(just_short);
  BOOST_CHECK_MESSAGE(just_short->find("to 200 or more") != std::string::npos, *just_short);
  BOOST_CHECK(!db::lock_table_shortfall(200, 200));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(storage_retries)

BOOST_AUTO_TEST_CASE(a_request_that_failed_waits_longer_at_each_try_and_apart_from_others) {
  using std::chrono::milliseconds;
  using storage_internal::retry_delay;
  int base = 50;
  for (int failed = 1; failed < storage_internal::max_tries; ++failed, base *= 4) {
    BOOST_CHECK_EQUAL(retry_delay(failed, 0.0).count(), base * 3 / 4);
    BOOST_CHECK_EQUAL(retry_delay(failed, 0.5).count(), base);
    BOOST_CHECK_LE(retry_delay(failed, 0.999).count(), base * 5 / 4);
  }
  // The waits of all tries but the last: about a second in all.
  auto total = milliseconds{0};
  for (int failed = 1; failed < storage_internal::max_tries; ++failed)
    total += retry_delay(failed, 0.5);
  BOOST_CHECK_EQUAL(total.count(), 1050);
}

BOOST_AUTO_TEST_SUITE_END()
