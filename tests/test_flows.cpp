// Deterministic actor flows without a database: the pusher, limiter and
// dispatcher of a node against stand-in storage actors, on CAF's testing
// scheduler, which runs one message at a time and only when told to.
#define BOOST_TEST_MODULE flows
#include <boost/test/unit_test.hpp>

#include "actors/alerter.hpp"
#include "actors/cluster.hpp"
#include "actors/dispatcher.hpp"
#include "actors/executors/caf_executors.hpp"
#include "actors/limiter.hpp"
#include "actors/metrics/node_metrics.hpp"
#include "actors/pusher.hpp"
#include "actors/readiness.hpp"
#include "messages/types.hpp"

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/scheduler/test_coordinator.hpp>
#include <caf/send.hpp>
#include <caf/typed_event_based_actor.hpp>

#include <prometheus/histogram.h>

#include <algorithm>
#include <array>
#include <deque>
#include <optional>

using namespace taskmill;
using namespace std::chrono_literals;

namespace {

/// What the stand-in storage actors were asked, and the due tasks they hold.
struct recorder {
  std::deque<pb::Task> due;
  std::vector<pb::ClaimRequest> claims;
  int next_due_asks = 0;
  // What the next due time asks are answered (-1: none due).
  int64_t next_due_in_ms = -1;
  // Whether the next due time's answer says work came due untaken.
  bool due_now = false;
  std::vector<pb::TaskOutcome> outcomes;
  // While set, claims wait to be answered, in order, by answer_claim: they
  // are under way, as on a busy connection.
  bool hold_claims = false;
  std::deque<std::pair<caf::typed_response_promise<pb::ClaimedTasks>, pb::ClaimRequest>> held;
  size_t most_held = 0;
  // Claims to answer with an error, as when the connection broke under them.
  int claims_to_fail = 0;
  // What the database has running on the node.
  pb::TaskList running_here;
  int running_asks = 0;
  // Reads, in order with the outcomes, of tasks still running.
  int still_running_asks = 0;
  // Task ids the database has ended, besides those with a stored outcome.
  std::vector<int64_t> ended;
  // Reports of outcomes to answer with an error.
  int completes_to_fail = 0;
  // Offers made, permits added to them (generation, permits), and offers
  // taken back (the permits held unheard of).
  std::vector<pb::ClaimRequest> offers;
  std::vector<std::pair<int64_t, int32_t>> added;
  std::vector<int32_t> withdrawn;
  // How many of an offer's permits submits took unheard of, when it is taken
  // back (by a claim, or alone).
  int32_t taken_unheard = 0;
};

pb::ClaimedTasks take_due(recorder& rec, const pb::ClaimRequest& req) {
  pb::ClaimedTasks out;
  int attempt = 0;
  auto room = req.grant().permits() - (req.offered() > 0 ? rec.taken_unheard : 0);
  if (req.offered() > 0) out.set_handed_unheard(rec.taken_unheard);
  while (!rec.due.empty() && out.tasks_size() < room) {
    auto task = rec.due.front();
    rec.due.pop_front();
    task.set_attempt(++attempt);
    *out.add_tasks() = task;
  }
  return out;
}

/// A claim_storage_actor, which also answers the oldest claim it holds when
/// told ok_atom.
caf::behavior claim_stand_in(caf::event_based_actor* self, std::shared_ptr<recorder> rec) {
  return {
      [self, rec](claim_atom, const pb::ClaimRequest& req) -> caf::result<pb::ClaimedTasks> {
        rec->claims.push_back(req);
        if (rec->claims_to_fail > 0) {
          --rec->claims_to_fail;
          return caf::make_error(caf::sec::request_receiver_down);
        }
        if (!rec->hold_claims) return take_due(*rec, req);
        rec->held.emplace_back(self->make_response_promise<pb::ClaimedTasks>(), req);
        rec->most_held = std::max(rec->most_held, rec->held.size());
        return rec->held.back().first;
      },
      [rec](caf::ok_atom) {
        auto [promise, req] = std::move(rec->held.front());
        rec->held.pop_front();
        promise.deliver(take_due(*rec, req));
      },
      [rec](next_due_atom, const pb::ClaimRequest&) {
        ++rec->next_due_asks;
        pb::NextDue next;
        next.set_due_now(rec->due_now);
        next.set_next_due_in_ms(rec->next_due_in_ms);
        return next;
      },
      [rec](make_offer_atom, const pb::ClaimRequest& offer) {
        rec->offers.push_back(offer);
        return true;
      },
      [rec](top_up_atom, const std::string&, int64_t generation, int32_t permits) {
        rec->added.emplace_back(generation, permits);
        return true;
      },
      [rec](take_back_atom, const std::string&, int32_t offered) {
        rec->withdrawn.push_back(offered);
        return rec->taken_unheard;
      },
      [rec](running_atom, const std::string&) {
        ++rec->running_asks;
        pb::Executions out;
        for (const auto& task : rec->running_here.tasks()) {
          out.add_task_ids(task.id());
          out.add_attempts(task.attempt());
        }
        return out;
      },
  };
}

outcome_storage_actor::behavior_type outcome_stand_in(outcome_storage_actor::pointer,
                                                      std::shared_ptr<recorder> rec) {
  return {
      [rec](complete_atom, const pb::TaskOutcomes& outcomes) -> caf::result<pb::OutcomeAcks> {
        if (rec->completes_to_fail > 0) {
          --rec->completes_to_fail;
          return caf::make_error(caf::sec::request_receiver_down);
        }
        pb::OutcomeAcks acks;
        for (const auto& o : outcomes.outcomes()) {
          rec->outcomes.push_back(o);
          auto ack = acks.add_acks();
          ack->set_task_id(o.task_id());
          ack->set_attempt(o.attempt());
          ack->set_applied(true);
        }
        return acks;
      },
      [](check_atom, const pb::Executions&) { return pb::Executions{}; },
      // Still running: those held running, but not ended nor with a stored
      // outcome.
      [rec](running_atom, const pb::Executions& asked) {
        ++rec->still_running_asks;
        pb::TaskList out;
        for (const auto& task : rec->running_here.tasks()) {
          auto id = task.id();
          bool was_asked = false;
          for (int i = 0; i < asked.task_ids_size(); ++i)
            was_asked |= asked.task_ids(i) == id && asked.attempts(i) == task.attempt();
          bool stored = std::any_of(rec->outcomes.begin(), rec->outcomes.end(), [&](const auto& o) {
            return o.task_id() == id && o.attempt() == task.attempt();
          });
          bool ended = std::find(rec->ended.begin(), rec->ended.end(), id) != rec->ended.end();
          if (was_asked && !stored && !ended) *out.add_tasks() = task;
        }
        return out;
      },
      [](take_cancels_atom, const pb::TakeCancels&) { return pb::CancelNotices{}; },
      [](cancels_told_atom, const pb::CancelNotices& told) { return told.cancels_size(); },
      [](deadline_atom, int64_t, int32_t) { return int64_t{0}; },
  };
}

pb::Task noop_task(int64_t id, int priority) {
  pb::Task t;
  t.set_id(id);
  t.set_type("NOOP");
  t.set_key(std::to_string(id));
  t.set_priority(priority);
  t.set_timeout_ms(5000);
  return t;
}

struct flow_fixture {
  flow_fixture()
      : sys(init(cfg)), sched(dynamic_cast<caf::scheduler::test_coordinator&>(sys.scheduler())) {}

  static caf::actor_system_config& init(caf::actor_system_config& cfg) {
    register_message_types(cfg);
    cfg.set("scheduler.policy", caf::atom("testing"));
    cfg.set("logger.file-verbosity", caf::atom("quiet"));
    return cfg;
  }

  /// Starts the three actors; `node_limit` permits in all, `hand_off_permits`
  /// of them offered to submits when idle once the listener connected.
  void start(int64_t node_limit, int32_t batch_size, int32_t global_limit = 0,
             int32_t hand_off_permits = 0, bool listener_connected = true) {
    limiter_options lo;
    lo.node_limit = node_limit;
    lo.global_limit = global_limit;
    lo.any_type = true;
    limiter = spawn_limiter(sys, lo);
    claims = caf::actor_cast<caf::actor>(sys.spawn(claim_stand_in, rec));
    outcomes = caf::actor_cast<caf::actor>(sys.spawn(outcome_stand_in, rec));
    auto node_cfg = std::make_shared<config>();
    task_type_config noop;
    noop.name = "NOOP";
    noop.executor = executor_kind::noop;
    node_cfg->types["NOOP"] = noop;
    task_type_config sleep;
    sleep.name = "SLEEP";
    sleep.executor = executor_kind::sleep;
    node_cfg->types["SLEEP"] = sleep;
    metrics = std::make_shared<node_metrics>();
    dispatcher = spawn_dispatcher(sys, {"n1",
                                        node_cfg,
                                        caf::actor_cast<outcome_storage_actor>(outcomes),
                                        limiter,
                                        {},
                                        nullptr,
                                        metrics});
    auto po = pusher_options_from(config{});
    po.node = "n1";
    po.batch_size = batch_size;
    po.hand_off_permits = hand_off_permits;
    po.poll_interval = 1h;
    po.storage = caf::actor_cast<claim_storage_actor>(claims);
    po.limiter = limiter;
    po.dispatcher = dispatcher;
    po.metrics = metrics;
    pusher = spawn_pusher(sys, po);
    caf::anon_send(limiter, caf::subscribe_atom_v, caf::actor_cast<wake_listener_actor>(pusher));
    // The listener connected: hand-offs are heard, and offers made.
    if (hand_off_permits > 0 && listener_connected) caf::anon_send(pusher, adopt_atom_v);
  }

  /// `handle`'s answer to `xs...`, asked by a helper actor, once it came:
  /// an answer that has not come yet may come once the test advances time.
  template <class T, class Handle, class... Ts>
  std::shared_ptr<std::optional<T>> ask_later(const Handle& handle, Ts... xs) {
    auto out = std::make_shared<std::optional<T>>();
    sys.spawn([out, handle, xs...](caf::event_based_actor* self) {
      self->request(handle, caf::infinite, xs...).then([out](T x) { *out = std::move(x); });
    });
    sched.run();
    return out;
  }

  /// The same, answered at once.
  template <class T, class Handle, class... Ts>
  T ask(const Handle& handle, Ts... xs) {
    auto out = ask_later<T>(handle, xs...);
    BOOST_REQUIRE(out->has_value());
    return std::move(**out);
  }

  /// Dispatches task `id` of type SLEEP, asleep for `ms`, as claimed.
  pb::Task dispatch_a_sleep(int64_t id, int ms) {
    auto sleeping = noop_task(id, 3);
    sleeping.set_type("SLEEP");
    sleeping.set_payload(std::to_string(ms));
    sleeping.set_attempt(1);
    pb::TaskList claimed;
    *claimed.add_tasks() = sleeping;
    caf::anon_send(dispatcher, dispatch_atom_v, claimed);
    sched.run();
    return sleeping;
  }

  /// Runs the first round, which finds nothing due, then lets `tasks` come
  /// due and holds the claim a wake-up sends for them: a claim after a short
  /// one. Asks for the next due time are answered `next_due_in_ms` from then.
  void hold_a_claim_after_a_short_one(int tasks, int64_t next_due_in_ms) {
    sched.run();
    BOOST_REQUIRE_EQUAL(rec->claims.size(), 1u);
    BOOST_REQUIRE_EQUAL(rec->next_due_asks, 1);
    rec->next_due_in_ms = next_due_in_ms;
    rec->hold_claims = true;
    for (int i = 1; i <= tasks; ++i) rec->due.push_back(noop_task(i, 3));
    caf::anon_send(pusher, wake_atom_v);
    sched.run();
    BOOST_REQUIRE_EQUAL(rec->held.size(), 1u);
    BOOST_REQUIRE(rec->claims[1].after_short_claim());
  }

  /// Answers the oldest claim under way from the due tasks; false if none is.
  bool answer_claim() {
    if (rec->held.empty()) return false;
    caf::anon_send(claims, caf::ok_atom_v);
    sched.run();
    return true;
  }

  /// No claim for long enough that an idle node offers permits.
  void stay_idle() {
    sched.run();
    sched.advance_time(20ms);
    sched.run();
  }

  /// The permits the limiter could grant now (given back at once).
  int32_t free_permits() {
    auto grant = ask<pb::ClaimGrant>(limiter, acquire_atom_v, int32_t{1'000'000});
    pb::PermitUse back;
    back.set_permits(grant.permits());
    caf::anon_send(limiter, settle_atom_v, back);
    sched.run();
    return grant.permits();
  }

  /// Tasks handed to this node by submits from the offer of `generation`,
  /// running by the database, heard of by the pusher: by their ids, or
  /// `carried` whole by their notifications.
  void hand_off(std::initializer_list<int64_t> ids, int64_t generation, bool carried = false) {
    for (auto id : ids) {
      auto task = noop_task(id, 3);
      task.set_attempt(1);
      *rec->running_here.add_tasks() = task;
    }
    hear_hand_offs(ids, generation, carried);
  }

  /// The notifications of hand-offs (attempt 1) reach the pusher.
  void hear_hand_offs(std::initializer_list<int64_t> ids, int64_t generation, bool carried) {
    pb::HandOffs handed;
    for (auto id : ids) {
      auto task = noop_task(id, 3);
      task.set_attempt(1);
      auto* hand_off = handed.add_hand_offs();
      hand_off->set_task_id(id);
      hand_off->set_attempt(1);
      hand_off->set_generation(generation);
      if (carried) *hand_off->mutable_task() = task;
    }
    caf::anon_send(pusher, hand_off_atom_v, handed);
    sched.run();
  }

  /// A node with 100 permits offers 8 of them once idle, and a claim that
  /// finds nothing leaves the offer standing; answers its generation.
  int64_t offer_through_a_short_claim() {
    start(100, 10, 0, 8);
    stay_idle();
    BOOST_REQUIRE_EQUAL(rec->offers.size(), 1u);
    caf::anon_send(pusher, wake_atom_v);
    sched.run();
    BOOST_REQUIRE_EQUAL(rec->claims.size(), 3u);
    BOOST_CHECK_EQUAL(rec->claims[2].offered(), 0);
    BOOST_CHECK_EQUAL(rec->offers.size(), 1u);
    return rec->offers[0].offer_generation();
  }

  /// The limiter's count of tasks in flight, asked by a helper actor.
  int64_t in_flight() {
    auto n = std::make_shared<int64_t>(-1);
    sys.spawn([n, limiter = limiter](caf::event_based_actor* self) {
      self->request(limiter, caf::infinite, stats_atom_v).then([n](const pb::Stats& stats) {
        *n = tasks_in_flight(stats);
      });
    });
    sched.run();
    return *n;
  }

  ~flow_fixture() {
    for (const auto& a :
         {caf::actor_cast<caf::actor>(pusher), caf::actor_cast<caf::actor>(dispatcher),
          caf::actor_cast<caf::actor>(limiter), claims, outcomes})
      if (a) caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
    sched.run();
  }

  caf::actor_system_config cfg;
  caf::actor_system sys;
  caf::scheduler::test_coordinator& sched;
  std::shared_ptr<recorder> rec = std::make_shared<recorder>();
  std::shared_ptr<node_metrics> metrics;
  limiter_actor limiter;
  dispatcher_actor dispatcher;
  pusher_actor pusher;
  caf::actor claims;
  caf::actor outcomes;
};

}  // namespace

BOOST_FIXTURE_TEST_SUITE(pusher_limiter_dispatcher, flow_fixture)

// A full claim is followed by two at once (the second waits while the first
// runs); only when the last claim under way found less than it could take
// does the pusher ask when the next task comes due.
BOOST_AUTO_TEST_CASE(only_a_claim_short_of_its_permits_asks_for_the_next_due_time) {
  for (int i = 1; i <= 5; ++i) rec->due.push_back(noop_task(i, 3));
  start(100, 2);
  sched.run();
  // 2 (full), then 2 (full) and 1 (short) together, then one more after
  // the full one, which finds nothing.
  BOOST_REQUIRE_EQUAL(rec->claims.size(), 4u);
  BOOST_CHECK_EQUAL(rec->outcomes.size(), 5u);
  BOOST_CHECK_EQUAL(rec->next_due_asks, 1);
  // After a full claim more is due: the claims after it go by the turns.
  BOOST_CHECK(!rec->claims[1].after_short_claim());
  BOOST_CHECK(!rec->claims[2].after_short_claim());
}

// While work is due the next claim is already asked for as the one before
// runs, so the claim connection does not wait on the hops between them; never
// more than two, so a claim does not hold permits long before it runs.
BOOST_AUTO_TEST_CASE(while_work_is_due_two_claims_are_under_way) {
  for (int i = 1; i <= 9; ++i) rec->due.push_back(noop_task(i, 3));
  rec->hold_claims = true;
  start(100, 2);
  sched.run();
  // Nothing is known to be due until a claim comes back full.
  BOOST_REQUIRE_EQUAL(rec->held.size(), 1u);
  BOOST_REQUIRE(answer_claim());
  BOOST_CHECK_EQUAL(rec->held.size(), 2u);
  int answered = 1;
  while (answer_claim()) ++answered;
  BOOST_CHECK_EQUAL(rec->most_held, 2u);
  // Four full claims of two, one of the last task, one that found nothing.
  BOOST_CHECK_EQUAL(answered, 6);
  BOOST_CHECK_EQUAL(rec->outcomes.size(), 9u);
  BOOST_CHECK_EQUAL(rec->next_due_asks, 1);
  BOOST_CHECK_EQUAL(in_flight(), 0);
}

BOOST_AUTO_TEST_CASE(a_claim_runs_its_tasks_and_their_permits_come_back_once_stored) {
  for (int i = 1; i <= 3; ++i) rec->due.push_back(noop_task(i, 3));
  start(100, 50);
  sched.run();
  // One claim, with permits for the batch.
  BOOST_REQUIRE_EQUAL(rec->claims.size(), 1u);
  const auto& claim = rec->claims.front();
  BOOST_CHECK_EQUAL(claim.grant().permits(), 50);
  BOOST_CHECK_EQUAL(claim.node(), "n1");
  // A turn per permit, shared out by the levels' weights 16:8:4:2:1; what
  // the turns leave unused the claim fills in priority order.
  BOOST_REQUIRE_EQUAL(claim.turns_size(), 50);
  std::array<int, 5> expected{26, 13, 6, 3, 2};
  for (int level = 1; level <= 5; ++level)
    BOOST_CHECK_LE(std::abs(std::count(claim.turns().begin(), claim.turns().end(), level) -
                            expected[level - 1]),
                   1);
  // Each task ran once, under the attempt it was claimed with, and succeeded.
  BOOST_REQUIRE_EQUAL(rec->outcomes.size(), 3u);
  for (const auto& o : rec->outcomes) {
    BOOST_CHECK_EQUAL(o.outcome(), pb::OUTCOME_SUCCEEDED);
    BOOST_CHECK_GE(o.attempt(), 1);
  }
  BOOST_CHECK_EQUAL(in_flight(), 0);
}

BOOST_AUTO_TEST_CASE(a_claim_asks_for_no_more_than_the_permits_left) {
  for (int i = 1; i <= 5; ++i) rec->due.push_back(noop_task(i, 1));
  start(2, 50);
  sched.run();
  BOOST_REQUIRE(!rec->claims.empty());
  for (const auto& c : rec->claims) BOOST_CHECK_LE(c.grant().permits(), 2);
  // Freed permits wake the pusher, which claims the rest: nothing waits for
  // the (hour-long) poll.
  BOOST_CHECK_EQUAL(rec->outcomes.size(), 5u);
  BOOST_CHECK(rec->due.empty());
  BOOST_CHECK_EQUAL(in_flight(), 0);
}

BOOST_AUTO_TEST_CASE(a_wake_up_claims_work_that_arrived_later) {
  start(100, 10);
  sched.run();
  BOOST_REQUIRE_EQUAL(rec->claims.size(), 1u);
  BOOST_CHECK(rec->outcomes.empty());
  rec->due.push_back(noop_task(7, 5));
  caf::anon_send(pusher, wake_atom_v);
  sched.run();
  BOOST_REQUIRE_EQUAL(rec->claims.size(), 2u);
  BOOST_REQUIRE_EQUAL(rec->outcomes.size(), 1u);
  BOOST_CHECK_EQUAL(rec->outcomes.front().task_id(), 7);
  // The first claim found nothing: the one after it may take all that is due
  // at once.
  BOOST_CHECK(!rec->claims[0].after_short_claim());
  BOOST_CHECK(rec->claims[1].after_short_claim());
}

// A claim after a short one asks for the next due time with it, so that the
// storage reads both in one round trip; the round ends on whichever answer
// comes second (the storage answers in order, but a claim it tries again
// after a deadlock comes after).
BOOST_AUTO_TEST_CASE(a_claim_after_a_short_one_asks_for_the_next_due_time_beside_it) {
  start(100, 10);
  hold_a_claim_after_a_short_one(1, 250);
  BOOST_CHECK_EQUAL(rec->next_due_asks, 2);
  // The claim, answered after the next due time, comes back short.
  BOOST_REQUIRE(answer_claim());
  BOOST_CHECK_EQUAL(rec->outcomes.size(), 1u);
  BOOST_CHECK_EQUAL(rec->next_due_asks, 2);
  // The round waits for the next task to come due, then claims again.
  sched.advance_time(250ms);
  sched.run();
  BOOST_CHECK_EQUAL(rec->claims.size(), 3u);
  BOOST_CHECK_EQUAL(in_flight(), 0);
}

// Under limits claims come back short with more due: a claim after a short
// one asks for the next due time after its answer, and only when it comes
// back short, so that a drain under limits reads it no more often than
// before.
BOOST_AUTO_TEST_CASE(under_limits_a_claim_after_a_short_one_asks_for_the_next_due_time_after_it) {
  start(100, 10, 50);
  hold_a_claim_after_a_short_one(10, -1);
  BOOST_CHECK_EQUAL(rec->next_due_asks, 1);
  // Full: claims follow at once, with no next due time read.
  BOOST_REQUIRE(answer_claim());
  BOOST_CHECK_EQUAL(rec->next_due_asks, 1);
  while (answer_claim()) {
  }
  BOOST_CHECK_EQUAL(rec->outcomes.size(), 10u);
  BOOST_CHECK_EQUAL(rec->next_due_asks, 2);
}

// Cluster-wide limits that leave room for 5 are filled by two claims that
// share it, 3 and 2; while their tasks run no claim goes out that could
// only come back empty (nor a read of the next due time after it), and each
// release brings the claims that fill the room again.
BOOST_AUTO_TEST_CASE(under_limits_no_claim_goes_out_while_the_nodes_own_tasks_fill_them) {
  for (int i = 1; i <= 20; ++i) {
    auto task = noop_task(i, 3);
    task.set_type("SLEEP");
    task.set_payload("1000");
    rec->due.push_back(task);
  }
  start(100, 10, 5);
  sched.run();
  BOOST_REQUIRE_EQUAL(rec->claims.size(), 2u);
  BOOST_CHECK_EQUAL(rec->claims[0].grant().permits(), 3);
  BOOST_CHECK_EQUAL(rec->claims[1].grant().permits(), 2);
  BOOST_CHECK_EQUAL(rec->next_due_asks, 0);
  BOOST_CHECK_EQUAL(in_flight(), 5);
  for (int second = 1; second <= 3; ++second) {
    sched.advance_time(1s);
    sched.run();
    BOOST_CHECK_EQUAL(rec->claims.size(), 2u + 2 * second);
    BOOST_CHECK_EQUAL(in_flight(), 5);
  }
  sched.advance_time(1s);
  sched.run();
  BOOST_CHECK_EQUAL(rec->outcomes.size(), 20u);
  for (const auto& claim : rec->claims) BOOST_CHECK_LE(claim.grant().permits(), 3);
  // The last claim found the work's end, and only then was the next due
  // time asked for.
  BOOST_CHECK_EQUAL(rec->claims.size(), 9u);
  BOOST_CHECK_EQUAL(rec->next_due_asks, 1);
  BOOST_CHECK_EQUAL(in_flight(), 0);
}

// Work due that claims do not take (a type at its limit, tasks locked by
// other nodes) is claimed again after 5 ms, then after a pause that doubles
// at each claim that takes nothing: a few claims a second, not two hundred.
// A claim that takes work starts the pauses over.
BOOST_AUTO_TEST_CASE(due_work_that_claims_do_not_take_is_tried_less_and_less_often) {
  start(100, 10);
  sched.run();
  BOOST_REQUIRE_EQUAL(rec->claims.size(), 1u);
  rec->due_now = true;
  caf::anon_send(pusher, wake_atom_v);
  sched.run();
  BOOST_REQUIRE_EQUAL(rec->claims.size(), 2u);
  auto claimed_at_ms = [&](int for_ms) {
    std::vector<int> out;
    for (int ms = 1; ms <= for_ms; ++ms) {
      auto before = rec->claims.size();
      sched.advance_time(1ms);
      sched.run();
      if (rec->claims.size() > before) out.push_back(ms);
    }
    return out;
  };
  BOOST_CHECK((claimed_at_ms(1000) == std::vector<int>{5, 15, 35, 75, 155, 315, 635}));
  rec->due.push_back(noop_task(1, 3));
  sched.advance_time(275ms);
  sched.run();
  BOOST_REQUIRE_EQUAL(rec->outcomes.size(), 1u);
  BOOST_CHECK((claimed_at_ms(40) == std::vector<int>{5, 15, 35}));
}

// Work held at a limit that keeps coming due does not hide another task's
// due time: the pause ends there, and once no work waits untaken the wait
// is the due time's alone.
BOOST_AUTO_TEST_CASE(the_pause_for_due_work_ends_at_the_next_due_time) {
  start(100, 10);
  sched.run();
  rec->due_now = true;
  rec->next_due_in_ms = 12;
  caf::anon_send(pusher, wake_atom_v);
  sched.run();
  BOOST_REQUIRE_EQUAL(rec->claims.size(), 2u);
  // 5, then 10, then 12 (not 20), then 12 again.
  for (int ms : {5, 10, 12, 12}) {
    auto before = rec->claims.size();
    sched.advance_time(std::chrono::milliseconds{ms - 1});
    sched.run();
    BOOST_CHECK_EQUAL(rec->claims.size(), before);
    sched.advance_time(1ms);
    sched.run();
    BOOST_CHECK_EQUAL(rec->claims.size(), before + 1);
  }
  rec->due_now = false;
  rec->next_due_in_ms = 300;
  sched.advance_time(12ms);
  sched.run();
  auto before = rec->claims.size();
  sched.advance_time(299ms);
  sched.run();
  BOOST_CHECK_EQUAL(rec->claims.size(), before);
  rec->due_now = true;
  sched.advance_time(1ms);
  sched.run();
  BOOST_CHECK_EQUAL(rec->claims.size(), before + 1);
  // Work waits untaken again: the pauses start over at 5 ms.
  sched.advance_time(5ms);
  sched.run();
  BOOST_CHECK_EQUAL(rec->claims.size(), before + 2);
}

// A claim whose answer was lost may have committed. Once claims are answered
// again, the pusher reads what runs here and the dispatcher runs what it did
// not know of, holding a permit for it until its outcome is stored.
BOOST_AUTO_TEST_CASE(after_a_claim_fails_the_tasks_it_may_have_taken_are_run) {
  rec->claims_to_fail = 1;
  auto lost = noop_task(7, 3);
  lost.set_attempt(1);
  *rec->running_here.add_tasks() = lost;
  start(100, 10);
  sched.run();
  BOOST_REQUIRE_EQUAL(rec->claims.size(), 1u);
  BOOST_CHECK_EQUAL(rec->running_asks, 0);
  caf::anon_send(pusher, wake_atom_v);
  sched.run();
  BOOST_REQUIRE_EQUAL(rec->claims.size(), 2u);
  BOOST_CHECK_EQUAL(rec->running_asks, 1);
  BOOST_REQUIRE_EQUAL(rec->outcomes.size(), 1u);
  BOOST_CHECK_EQUAL(rec->outcomes[0].task_id(), 7);
  BOOST_CHECK_EQUAL(rec->outcomes[0].attempt(), 1);
  BOOST_CHECK_EQUAL(in_flight(), 0);
  // Later claims do not read it again.
  caf::anon_send(pusher, wake_atom_v);
  sched.run();
  BOOST_CHECK_EQUAL(rec->claims.size(), 3u);
  BOOST_CHECK_EQUAL(rec->running_asks, 1);
}

// What the database has running here may be known to the dispatcher (it runs
// it, or its outcome is on the way) or have ended since it was read: none of
// those runs again under the same attempt.
BOOST_AUTO_TEST_CASE(the_dispatcher_adopts_only_tasks_it_does_not_know_and_that_still_run) {
  start(100, 10);
  sched.run();
  auto sleeping = dispatch_a_sleep(1, 60000);
  auto unknown = noop_task(2, 3);
  unknown.set_attempt(1);
  auto ended = noop_task(3, 3);
  ended.set_attempt(1);
  rec->ended.push_back(3);
  pb::Executions running;
  for (const auto& t : {sleeping, unknown, ended}) {
    *rec->running_here.add_tasks() = t;
    running.add_task_ids(t.id());
    running.add_attempts(t.attempt());
  }
  caf::anon_send(dispatcher, adopt_atom_v, running);
  sched.run();
  BOOST_REQUIRE_EQUAL(rec->outcomes.size(), 1u);
  BOOST_CHECK_EQUAL(rec->outcomes[0].task_id(), 2);
  // Only the one run took a permit, and gave it back with its outcome (the
  // sleeping task was dispatched past the limiter here).
  BOOST_CHECK_EQUAL(in_flight(), 0);
  // Read again once its outcome was stored, it does not run twice.
  caf::anon_send(dispatcher, adopt_atom_v, running);
  sched.run();
  BOOST_CHECK_EQUAL(rec->outcomes.size(), 1u);
}

// An execution's time is the actor clock's: here the scheduler's, advanced by
// the test, not the time the test took.
BOOST_AUTO_TEST_CASE(an_executions_time_is_measured_on_the_actor_clock) {
  start(100, 10);
  sched.run();
  dispatch_a_sleep(1, 2000);
  BOOST_CHECK(rec->outcomes.empty());
  sched.advance_time(2s);
  sched.run();
  BOOST_REQUIRE_EQUAL(rec->outcomes.size(), 1u);
  auto histogram = metrics->of_type("SLEEP").execution_seconds.Collect().histogram;
  BOOST_CHECK_EQUAL(histogram.sample_count, 1u);
  BOOST_CHECK_CLOSE(histogram.sample_sum, 2.0, 1.0);
}

// The database took an attempt back (its heartbeat went silent) and this
// node claimed the task again: the older attempt's end is stale and stores
// nothing, so its permit comes back as the newer one starts. Held for good,
// it would cut every claim of a node whose types' limits bound it.
BOOST_AUTO_TEST_CASE(a_task_claimed_again_under_a_new_attempt_holds_one_permit) {
  start(100, 10);
  sched.run();
  pb::PermitUse claims;
  claims.add_claimed_types("SLEEP");
  claims.add_claimed_types("SLEEP");
  caf::anon_send(limiter, settle_atom_v, claims);
  auto again = dispatch_a_sleep(1, 1000);
  again.set_attempt(2);
  pb::TaskList claimed;
  *claimed.add_tasks() = again;
  caf::anon_send(dispatcher, dispatch_atom_v, claimed);
  sched.run();
  BOOST_CHECK_EQUAL(in_flight(), 1);
  sched.advance_time(1s);
  sched.run();
  BOOST_REQUIRE_EQUAL(rec->outcomes.size(), 1u);
  BOOST_CHECK_EQUAL(rec->outcomes[0].attempt(), 2);
  BOOST_CHECK_EQUAL(in_flight(), 0);
}

BOOST_AUTO_TEST_CASE(a_task_whose_outcome_waits_to_be_stored_again_is_not_adopted) {
  start(100, 10);
  sched.run();
  rec->completes_to_fail = 1;
  auto task = noop_task(4, 3);
  task.set_attempt(1);
  pb::TaskList list;
  *list.add_tasks() = task;
  caf::anon_send(dispatcher, dispatch_atom_v, list);
  sched.run();
  BOOST_REQUIRE_EQUAL(rec->completes_to_fail, 0);
  // Still running by the database: its outcome is not stored.
  *rec->running_here.add_tasks() = task;
  pb::Executions running;
  running.add_task_ids(4);
  running.add_attempts(1);
  caf::anon_send(dispatcher, adopt_atom_v, running);
  sched.run();
  BOOST_CHECK(rec->outcomes.empty());
  sched.trigger_timeouts();
  sched.run();
  BOOST_REQUIRE_EQUAL(rec->outcomes.size(), 1u);
  BOOST_CHECK_EQUAL(rec->outcomes[0].task_id(), 4);
}

// An idle node offers permits to submits; the tasks they hand it run on the
// offer's permits, and as many are added to the offer once half of it went,
// so that it is not used up. No permit is lost or counted twice.
BOOST_AUTO_TEST_CASE(an_idle_node_offers_permits_and_tops_the_offer_up_as_hand_offs_take_them) {
  start(100, 10, 0, 8);
  sched.run();
  BOOST_CHECK(rec->offers.empty());
  stay_idle();
  BOOST_REQUIRE_EQUAL(rec->offers.size(), 1u);
  const auto& offer = rec->offers[0];
  BOOST_CHECK_EQUAL(offer.grant().permits(), 8);
  BOOST_CHECK_NE(offer.offer_generation(), 0);
  BOOST_CHECK_EQUAL(free_permits(), 92);
  hand_off({1, 2, 3}, offer.offer_generation());
  BOOST_CHECK_EQUAL(rec->outcomes.size(), 3u);
  BOOST_CHECK(rec->added.empty());
  // Their permits came back with their outcomes: the offer holds 5.
  BOOST_CHECK_EQUAL(free_permits(), 95);
  hand_off({4}, offer.offer_generation());
  BOOST_REQUIRE_EQUAL(rec->added.size(), 1u);
  BOOST_CHECK_EQUAL(rec->added[0].first, offer.offer_generation());
  BOOST_CHECK_EQUAL(rec->added[0].second, 4);
  BOOST_CHECK_EQUAL(rec->outcomes.size(), 4u);
  BOOST_CHECK_EQUAL(in_flight(), 0);
  BOOST_CHECK_EQUAL(free_permits(), 92);
  // Hand-offs from an offer no longer standing take permits of their own.
  hand_off({5}, offer.offer_generation() - 1);
  BOOST_CHECK_EQUAL(rec->outcomes.size(), 5u);
  BOOST_CHECK_EQUAL(free_permits(), 92);
  BOOST_CHECK_EQUAL(rec->offers.size(), 1u);
}

// A hand-off whose notification carried its task runs without a read. One
// heard only after a read of what runs here found it, ran it and saw it end
// is read again, in order with the outcomes, and does not run twice.
BOOST_AUTO_TEST_CASE(carried_hand_offs_run_unread_but_not_one_a_read_found_first) {
  start(100, 10, 0, 8);
  stay_idle();
  BOOST_REQUIRE_EQUAL(rec->offers.size(), 1u);
  auto generation = rec->offers[0].offer_generation();
  hear_hand_offs({1}, generation, true);
  BOOST_CHECK_EQUAL(rec->outcomes.size(), 1u);
  BOOST_CHECK_EQUAL(rec->still_running_asks, 0);
  // Task 2's notification is late: the listener reconnected meanwhile, and
  // the read of what runs here found the task and ran it.
  auto late = noop_task(2, 3);
  late.set_attempt(1);
  *rec->running_here.add_tasks() = late;
  caf::anon_send(pusher, adopt_atom_v);
  sched.run();
  BOOST_REQUIRE_EQUAL(rec->outcomes.size(), 2u);
  auto reads = rec->still_running_asks;
  hear_hand_offs({2}, generation, true);
  BOOST_CHECK_EQUAL(rec->outcomes.size(), 2u);
  BOOST_CHECK_EQUAL(rec->still_running_asks, reads + 1);
  BOOST_CHECK_EQUAL(in_flight(), 0);
  // Hand-offs of an offer made after that read run from their notifications.
  stay_idle();
  BOOST_REQUIRE_EQUAL(rec->offers.size(), 2u);
  hear_hand_offs({3}, rec->offers[1].offer_generation(), true);
  BOOST_CHECK_EQUAL(rec->outcomes.size(), 3u);
  BOOST_CHECK_EQUAL(rec->still_running_asks, reads + 1);
  BOOST_CHECK_EQUAL(in_flight(), 0);
  // The offer holds what task 3 did not take.
  BOOST_CHECK_EQUAL(free_permits(), 100 - (rec->offers[1].grant().permits() - 1));
}

// Hand-offs heard together, one carried whole and one by its ids (too large
// for its notification): both run, each on a permit of the offer.
BOOST_AUTO_TEST_CASE(carried_and_read_hand_offs_heard_together_share_the_offer_permits) {
  start(100, 10, 0, 8);
  stay_idle();
  BOOST_REQUIRE_EQUAL(rec->offers.size(), 1u);
  pb::HandOffs handed;
  for (int64_t id : {1, 2}) {
    auto task = noop_task(id, 3);
    task.set_attempt(1);
    *rec->running_here.add_tasks() = task;
    auto* hand_off = handed.add_hand_offs();
    hand_off->set_task_id(id);
    hand_off->set_attempt(1);
    hand_off->set_generation(rec->offers[0].offer_generation());
    if (id == 1) *hand_off->mutable_task() = task;
  }
  caf::anon_send(pusher, hand_off_atom_v, handed);
  sched.run();
  BOOST_CHECK_EQUAL(rec->outcomes.size(), 2u);
  BOOST_CHECK_EQUAL(rec->still_running_asks, 1);
  BOOST_CHECK_EQUAL(in_flight(), 0);
  BOOST_CHECK_EQUAL(free_permits(), 94);
}

// Until its listener connected a node would not hear of the tasks handed to
// it: it offers nothing.
BOOST_AUTO_TEST_CASE(no_offer_stands_before_the_listener_connected) {
  start(100, 10, 0, 8, false);
  stay_idle();
  BOOST_CHECK(rec->offers.empty());
  caf::anon_send(pusher, adopt_atom_v);
  stay_idle();
  BOOST_CHECK_EQUAL(rec->offers.size(), 1u);
}

// The offer stands through claims that find little; a claim after a full one
// takes it back and its permits over, less what submits took of them
// unheard, whose tasks take permits of their own once heard of.
BOOST_AUTO_TEST_CASE(a_claim_after_a_full_one_takes_the_offer_over) {
  auto generation = offer_through_a_short_claim();
  rec->taken_unheard = 2;
  for (int i = 1; i <= 30; ++i) rec->due.push_back(noop_task(100 + i, 3));
  caf::anon_send(pusher, wake_atom_v);
  sched.run();
  std::vector<int32_t> offered;
  for (const auto& c : rec->claims) offered.push_back(c.offered());
  BOOST_REQUIRE_GE(rec->claims.size(), 5u);
  BOOST_CHECK_EQUAL(rec->claims[3].offered(), 0);
  BOOST_CHECK_EQUAL(rec->claims[4].offered(), 8);
  BOOST_CHECK_EQUAL(rec->claims[4].offer_generation(), generation);
  BOOST_CHECK_EQUAL(std::count_if(offered.begin(), offered.end(), [](int32_t n) { return n > 0; }),
                    1);
  BOOST_CHECK_EQUAL(rec->outcomes.size(), 30u);
  // Until the two taken unheard are heard of, their permits stay held: no
  // claim takes their room.
  BOOST_CHECK_EQUAL(in_flight(), 0);
  BOOST_CHECK_EQUAL(free_permits(), 98);
  // The two taken unheard arrive; a new offer stands once the work ran out.
  hand_off({1, 2}, generation);
  BOOST_CHECK_EQUAL(rec->outcomes.size(), 32u);
  BOOST_CHECK_EQUAL(in_flight(), 0);
  stay_idle();
  BOOST_REQUIRE_EQUAL(rec->offers.size(), 2u);
  BOOST_CHECK_NE(rec->offers[1].offer_generation(), generation);
  BOOST_CHECK_EQUAL(free_permits(), 100 - rec->offers[1].grant().permits());
}

// A claim after a full one takes the offer over; having taken all it had
// room for (its permits less what submits took of the offer unheard), it is
// as full as a claim gets: more is due, and another claim goes out beside
// the one under way.
BOOST_AUTO_TEST_CASE(a_claim_that_took_the_offer_over_and_filled_its_room_is_full) {
  auto generation = offer_through_a_short_claim();
  rec->taken_unheard = 2;
  for (int i = 1; i <= 60; ++i) rec->due.push_back(noop_task(100 + i, 3));
  rec->hold_claims = true;
  caf::anon_send(pusher, wake_atom_v);
  sched.run();
  BOOST_REQUIRE_EQUAL(rec->held.size(), 1u);
  BOOST_REQUIRE(answer_claim());
  BOOST_REQUIRE_EQUAL(rec->held.size(), 2u);
  BOOST_REQUIRE_EQUAL(rec->held.front().second.offer_generation(), generation);
  BOOST_REQUIRE(answer_claim());
  BOOST_CHECK_EQUAL(rec->outcomes.size(), 26u);
  BOOST_CHECK_EQUAL(rec->held.size(), 2u);
}

// Hand-offs heard of while the claim that takes their offer back is under
// way take permits of their own; the claim keeps permits only for the others,
// and gives those back once it has not heard of them for a few seconds.
BOOST_AUTO_TEST_CASE(permits_are_kept_for_hand_offs_not_yet_heard_of_and_not_for_ever) {
  auto generation = offer_through_a_short_claim();
  rec->taken_unheard = 3;
  rec->hold_claims = true;
  for (int i = 1; i <= 30; ++i) rec->due.push_back(noop_task(100 + i, 3));
  caf::anon_send(pusher, wake_atom_v);
  sched.run();
  BOOST_REQUIRE(answer_claim());
  BOOST_REQUIRE_EQUAL(rec->held.size(), 2u);
  BOOST_REQUIRE_EQUAL(rec->held.front().second.offered(), 8);
  hand_off({1}, generation);
  while (answer_claim()) {
  }
  rec->hold_claims = false;
  BOOST_CHECK_EQUAL(rec->outcomes.size(), 31u);
  BOOST_CHECK_EQUAL(in_flight(), 0);
  BOOST_CHECK_EQUAL(free_permits(), 98);
  // One of the two arrives and runs on a kept permit; the other never does.
  hand_off({2}, generation);
  BOOST_CHECK_EQUAL(rec->outcomes.size(), 32u);
  BOOST_CHECK_EQUAL(free_permits(), 99);
  sched.advance_time(5s);
  sched.run();
  stay_idle();
  BOOST_REQUIRE_EQUAL(rec->offers.size(), 2u);
  BOOST_CHECK_EQUAL(free_permits(), 100 - rec->offers[1].grant().permits());
  // Heard of late, it takes a permit of its own.
  hand_off({3}, generation);
  BOOST_CHECK_EQUAL(rec->outcomes.size(), 33u);
  BOOST_CHECK_EQUAL(in_flight(), 0);
  BOOST_CHECK_EQUAL(free_permits(), 100 - rec->offers[1].grant().permits());
}

// A node whose permits are all kept for hand-offs it never hears of claims
// nothing; once they go back, the limiter wakes it and it claims what is due.
BOOST_AUTO_TEST_CASE(permits_given_back_wake_a_node_that_waited_for_them) {
  start(8, 10, 0, 8);
  stay_idle();
  BOOST_REQUIRE_EQUAL(rec->offers.size(), 1u);
  BOOST_REQUIRE_EQUAL(free_permits(), 0);
  rec->taken_unheard = 8;
  for (int i = 1; i <= 30; ++i) rec->due.push_back(noop_task(100 + i, 3));
  caf::anon_send(pusher, wake_atom_v);
  sched.run();
  BOOST_REQUIRE_EQUAL(rec->claims.back().offered(), 8);
  BOOST_CHECK(rec->outcomes.empty());
  rec->taken_unheard = 0;
  sched.advance_time(5s);
  sched.run();
  BOOST_CHECK_EQUAL(rec->outcomes.size(), 30u);
  BOOST_CHECK(rec->due.empty());
}

// A node whose lease is in doubt takes its offer back; the permits submits
// did not take of it come back, those they took stay kept for their tasks.
BOOST_AUTO_TEST_CASE(a_paused_node_takes_its_offer_back) {
  start(100, 10, 0, 8);
  stay_idle();
  BOOST_REQUIRE_EQUAL(rec->offers.size(), 1u);
  auto generation = rec->offers[0].offer_generation();
  rec->taken_unheard = 2;
  caf::anon_send(pusher, pause_atom_v, true);
  sched.run();
  BOOST_REQUIRE_EQUAL(rec->withdrawn.size(), 1u);
  BOOST_CHECK_EQUAL(rec->withdrawn[0], 8);
  BOOST_CHECK_EQUAL(free_permits(), 98);
  caf::anon_send(pusher, pause_atom_v, false);
  sched.run();
  BOOST_CHECK_EQUAL(rec->claims.back().offered(), 0);
  hand_off({1, 2}, generation);
  BOOST_CHECK_EQUAL(rec->outcomes.size(), 2u);
  BOOST_CHECK_EQUAL(in_flight(), 0);
  BOOST_CHECK_EQUAL(free_permits(), 100);
  stay_idle();
  BOOST_REQUIRE_EQUAL(rec->offers.size(), 2u);
  BOOST_CHECK_EQUAL(free_permits(), 92);
}

// Hand-offs whose notifications were lost (the listener reconnected) run on
// the permits kept for them, which the claims meanwhile do not take.
BOOST_AUTO_TEST_CASE(hand_offs_the_listener_missed_run_on_the_permits_kept_for_them) {
  start(100, 10, 0, 8);
  stay_idle();
  BOOST_REQUIRE_EQUAL(rec->offers.size(), 1u);
  rec->taken_unheard = 2;
  caf::anon_send(pusher, pause_atom_v, true);
  sched.run();
  caf::anon_send(pusher, pause_atom_v, false);
  sched.run();
  BOOST_REQUIRE_EQUAL(free_permits(), 98);
  for (int64_t id : {1, 2}) {
    auto task = noop_task(id, 3);
    task.set_attempt(1);
    *rec->running_here.add_tasks() = task;
  }
  rec->hold_claims = true;
  caf::anon_send(pusher, adopt_atom_v);
  sched.run();
  BOOST_REQUIRE_EQUAL(rec->held.size(), 1u);
  // The claim under way holds 10; the two kept are not among the rest.
  BOOST_CHECK_EQUAL(free_permits(), 88);
  rec->hold_claims = false;
  BOOST_REQUIRE(answer_claim());
  BOOST_CHECK_EQUAL(rec->outcomes.size(), 2u);
  BOOST_CHECK_EQUAL(in_flight(), 0);
  BOOST_CHECK_EQUAL(free_permits(), 100);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_FIXTURE_TEST_SUITE(limiter_grants, flow_fixture)

BOOST_AUTO_TEST_CASE(a_grant_carries_the_limits_and_the_room_on_executors) {
  limiter_options lo;
  lo.node_limit = 4;
  lo.global_limit = 10;
  lo.type_limits = {{"A", 2}};
  lo.types = {"A", "B"};
  limiter = spawn_limiter(sys, lo);
  caf::anon_send(limiter, capacity_atom_v, std::string{"C"}, int32_t{3});
  auto grant = ask<pb::ClaimGrant>(limiter, acquire_atom_v, int32_t{3});
  BOOST_CHECK_EQUAL(grant.permits(), 3);
  BOOST_CHECK_EQUAL(grant.global_limit(), 10);
  BOOST_CHECK_EQUAL(grant.type_limits().at("A"), 2);
  BOOST_CHECK(!grant.any_type());
  std::vector<std::string> types(grant.types().begin(), grant.types().end());
  BOOST_CHECK((types == std::vector<std::string>{"A", "B", "C"}));
  BOOST_CHECK_EQUAL(grant.executor_room().at("C"), 3);
  // A claim under way beside it gets none of the places granted to it.
  auto beside = ask<pb::ClaimGrant>(limiter, acquire_atom_v, int32_t{3});
  BOOST_CHECK_EQUAL(beside.permits(), 1);
  BOOST_CHECK_EQUAL(beside.executor_room().at("C"), 0);
  pb::PermitUse nothing;
  nothing.set_permits(1);
  caf::anon_send(limiter, settle_atom_v, nothing);
  // Two of C claimed, one permit unused: one permit and one place left.
  pb::PermitUse use;
  use.set_permits(3);
  (*use.mutable_executor_room())["C"] = 3;
  use.add_claimed_types("C");
  use.add_claimed_types("C");
  caf::anon_send(limiter, settle_atom_v, use);
  auto next = ask<pb::ClaimGrant>(limiter, acquire_atom_v, int32_t{3});
  BOOST_CHECK_EQUAL(next.permits(), 2);
  BOOST_CHECK_EQUAL(next.executor_room().at("C"), 1);
  // Permits of stored outcomes come back.
  pb::PermitRelease release;
  release.add_types("C");
  caf::anon_send(limiter, release_atom_v, release);
  use.Clear();
  use.set_permits(2);
  caf::anon_send(limiter, settle_atom_v, use);
  BOOST_CHECK_EQUAL(in_flight(), 1);
}

// The types' limits bound the grants of a node whose every type has one,
// beside its own tasks in flight, which every node's count includes.
BOOST_AUTO_TEST_CASE(a_grant_leaves_the_room_the_nodes_own_tasks_take_under_its_limits) {
  limiter_options lo;
  lo.node_limit = 100;
  lo.type_limits = {{"A", 3}, {"B", 2}};
  lo.types = {"A", "B"};
  limiter = spawn_limiter(sys, lo);
  auto acquire = [&] {
    return ask<pb::ClaimGrant>(limiter, acquire_atom_v, int32_t{10}).permits();
  };
  // Two claims under way share the room.
  BOOST_CHECK_EQUAL(acquire(), 3);
  BOOST_CHECK_EQUAL(acquire(), 2);
  BOOST_CHECK_EQUAL(acquire(), 0);
  // They took three of A and one of B, one permit unused.
  pb::PermitUse use;
  use.set_permits(5);
  for (auto type : {"A", "A", "A", "B"}) use.add_claimed_types(type);
  caf::anon_send(limiter, settle_atom_v, use);
  BOOST_CHECK_EQUAL(acquire(), 1);
  pb::PermitUse unused;
  unused.set_permits(1);
  caf::anon_send(limiter, settle_atom_v, unused);
  pb::PermitRelease release;
  release.add_types("A");
  release.add_types("A");
  caf::anon_send(limiter, release_atom_v, release);
  BOOST_CHECK_EQUAL(acquire(), 3);
  // A type without a limit among the node's types: the limits bound nothing
  // the node can see.
  lo.types = {"A", "B", "FREE"};
  limiter = spawn_limiter(sys, lo);
  BOOST_CHECK_EQUAL(acquire(), 10);
}

BOOST_AUTO_TEST_SUITE_END()

namespace {

/// A storage actor whose status is `status`.
storage_status_actor status_stand_in(caf::actor_system& sys, pb::StorageStatus status) {
  return sys.spawn([status]() -> storage_status_actor::behavior_type {
    return {[status](status_atom) { return status; }};
  });
}

/// Status requests a busy storage actor has not answered yet.
using unanswered = std::vector<caf::typed_response_promise<pb::StorageStatus>>;

/// A storage actor busy connecting: it answers no status until `kept` is
/// cleared, which drops the requests (the test clears it before it ends).
storage_status_actor busy_stand_in(caf::actor_system& sys, std::shared_ptr<unanswered> kept) {
  return sys.spawn(
      [kept](storage_status_actor::pointer self) -> storage_status_actor::behavior_type {
        return {[self, kept](status_atom) {
          kept->push_back(self->make_response_promise<pb::StorageStatus>());
          return kept->back();
        }};
      });
}

pb::StorageStatus connected_status() {
  pb::StorageStatus s;
  s.set_connected(true);
  s.set_schema_current(true);
  return s;
}

/// Where a storage actor keeps `status` for readiness.
std::shared_ptr<shared_storage_status> kept_status(const pb::StorageStatus& status) {
  auto kept = std::make_shared<shared_storage_status>();
  kept->update([&](pb::StorageStatus& s) { s = status; });
  return kept;
}

}  // namespace

/// Readiness is probed with `ask_later`, not `ask`, which requires an
/// answer: a failing run must reach its end and let the busy stand-ins go.
struct readiness_fixture : flow_fixture {
  template <class... Actors>
  static void stop(const Actors&... actors) {
    (caf::anon_send_exit(actors, caf::exit_reason::user_shutdown), ...);
  }
};

BOOST_FIXTURE_TEST_SUITE(readiness_checks, readiness_fixture)

// A probe is answered with a problem as soon as one check finds it, not
// once an actor that does not answer runs out of patience (SPEC §8,
// /readyz): here a busy storage actor whose published status is fine.
BOOST_AUTO_TEST_CASE(a_problem_is_answered_without_waiting_for_a_busy_check) {
  auto kept = std::make_shared<unanswered>();
  auto busy = busy_stand_in(sys, kept);
  auto gone = caf::actor_cast<pingable_actor>(sys.spawn([]() -> pingable_actor::behavior_type {
    return {[](ping_atom) { return caf::ok_atom_v; }};
  }));
  caf::anon_send_exit(gone, caf::exit_reason::kill);
  sched.run();
  auto readiness = spawn_readiness(
      sys, {{{"claim storage", busy, kept_status(connected_status())}}, {{"limiter", gone}}});
  auto ready = ask_later<std::string>(readiness, ready_atom_v, caf::timespan{200ms});
  BOOST_CHECK_EQUAL(ready->value_or("(no answer)"), "the limiter actor does not answer");
  BOOST_CHECK_EQUAL(kept->size(), 1u);
  sched.advance_time(200ms);
  sched.run();
  kept->clear();
  stop(readiness, busy);
}

// Storage actors busy connecting, as while a server takes no connections
// and answers none: the status one publishes says it is not connected, and
// the probe is answered without asking any.
BOOST_AUTO_TEST_CASE(storage_actors_all_busy_connecting_are_not_waited_for) {
  pb::StorageStatus lost;
  lost.set_last_error("timeout expired");
  auto kept = std::make_shared<unanswered>();
  auto claims_storage = busy_stand_in(sys, kept);
  auto outcomes_storage = busy_stand_in(sys, kept);
  auto readiness =
      spawn_readiness(sys, {{{"claim storage", claims_storage, kept_status(connected_status())},
                             {"outcome storage", outcomes_storage, kept_status(lost)}},
                            {}});
  auto ready = ask_later<std::string>(readiness, ready_atom_v, caf::timespan{200ms});
  BOOST_CHECK_EQUAL(ready->value_or("(no answer)"),
                    "PostgreSQL is not connected (outcome storage): timeout expired");
  BOOST_CHECK_EQUAL(kept->size(), 0u);
  kept->clear();
  // Alive asks the actors themselves: a busy one is taken for wedged once
  // the patience runs out, not before.
  auto alive = ask_later<std::string>(readiness, alive_atom_v, caf::timespan{200ms});
  BOOST_CHECK(!alive->has_value());
  BOOST_CHECK_EQUAL(kept->size(), 2u);
  sched.advance_time(200ms);
  sched.run();
  BOOST_CHECK_MESSAGE(alive->value_or("").ends_with("storage actor does not answer"),
                      alive->value_or("(no answer)"));
  kept->clear();
  stop(readiness, claims_storage, outcomes_storage);
}

// A storage actor may lose its connection between the probe's read of its
// published status and its answer: what it answers counts.
BOOST_AUTO_TEST_CASE(a_storage_actor_answering_that_it_lost_its_connection_is_not_ready) {
  pb::StorageStatus lost;
  lost.set_last_error("server closed the connection unexpectedly");
  auto claims_storage = status_stand_in(sys, lost);
  auto readiness = spawn_readiness(
      sys, {{{"claim storage", claims_storage, kept_status(connected_status())}}, {}});
  BOOST_CHECK_EQUAL(
      ask_later<std::string>(readiness, ready_atom_v, caf::timespan{10s})->value_or("(no answer)"),
      "PostgreSQL is not connected (claim storage): server closed the connection unexpectedly");
  stop(readiness, claims_storage);
}

// Or it is busy noticing the loss and answers nothing in time: the probe
// says what it published meanwhile, and that it does not answer only while
// that still says connected.
BOOST_AUTO_TEST_CASE(a_storage_actor_losing_its_connection_while_asked_is_said_not_connected) {
  auto kept = std::make_shared<unanswered>();
  auto claims_storage = busy_stand_in(sys, kept);
  auto published = kept_status(connected_status());
  auto readiness = spawn_readiness(sys, {{{"claim storage", claims_storage, published}}, {}});
  auto wedged = ask_later<std::string>(readiness, ready_atom_v, caf::timespan{200ms});
  BOOST_CHECK(!wedged->has_value());
  sched.advance_time(200ms);
  sched.run();
  BOOST_CHECK_EQUAL(wedged->value_or("(no answer)"), "the claim storage actor does not answer");
  auto ready = ask_later<std::string>(readiness, ready_atom_v, caf::timespan{200ms});
  BOOST_CHECK(!ready->has_value());
  published->update([](pb::StorageStatus& s) { s.set_connected(false); });
  sched.advance_time(200ms);
  sched.run();
  BOOST_CHECK_EQUAL(ready->value_or("(no answer)"), "PostgreSQL is not connected (claim storage)");
  kept->clear();
  stop(readiness, claims_storage);
}

BOOST_AUTO_TEST_CASE(ready_once_every_check_passed) {
  auto claims_storage = status_stand_in(sys, connected_status());
  auto outcomes_storage = status_stand_in(sys, connected_status());
  auto readiness = spawn_readiness(
      sys, {{{"claim storage", claims_storage, kept_status(connected_status())},
             {"outcome storage", outcomes_storage, kept_status(connected_status())}},
            {}});
  BOOST_CHECK_EQUAL(
      ask_later<std::string>(readiness, ready_atom_v, caf::timespan{10s})->value_or("(no answer)"),
      "");
  stop(readiness, claims_storage, outcomes_storage);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_FIXTURE_TEST_SUITE(caf_executor_pools, flow_fixture)

executor_actor::behavior_type idle_executor() {
  return {[](execute_atom, const pb::Task&) { return pb::TaskOutcome{}; },
          [](cancel_atom, int64_t, int32_t) {}};
}

BOOST_AUTO_TEST_CASE(tasks_go_to_the_executor_with_the_most_room) {
  auto small = sys.spawn(idle_executor);
  auto large = sys.spawn(idle_executor);
  caf_executor_pool pool;
  pb::ExecutorRegistration r;
  BOOST_CHECK(pool.add(small, r));  // no types, no capacity: refused
  r.add_types("T");
  r.set_capacity(1);
  BOOST_REQUIRE(!pool.add(small, r));
  r.add_types("U");
  r.set_capacity(3);
  BOOST_REQUIRE(!pool.add(large, r));
  BOOST_CHECK_EQUAL(pool.capacity("T"), 4);
  BOOST_CHECK_EQUAL(pool.capacity("U"), 3);
  BOOST_CHECK_EQUAL(pool.capacity("V"), 0);
  BOOST_CHECK(!pool.take("V"));
  // large has 3 free, small 1: large takes two before small gets one.
  BOOST_CHECK(pool.take("T") == large);
  BOOST_CHECK(pool.take("T") == large);
  auto third = pool.take("T");
  BOOST_CHECK(third == large || third == small);
  pool.release(large.address());
  pool.release(large.address());
  BOOST_CHECK(pool.take("T") == large);
  // An executor that goes away takes its types with it.
  auto types = pool.remove(large.address());
  BOOST_CHECK((types == std::vector<std::string>{"T", "U"}));
  BOOST_CHECK_EQUAL(pool.capacity("T"), 1);
  BOOST_CHECK(!pool.take("U"));
  BOOST_CHECK(pool.remove(large.address()).empty());
  for (const auto& a : {small, large}) caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
}

BOOST_AUTO_TEST_SUITE_END()

namespace {

/// A membership storage that answers heartbeats (alive, or not at all while
/// they hang) and asks for the lead as told, and a pusher that records
/// whether it was paused.
struct membership_recorder {
  bool lead_answer = true;
  bool lead_fails = false;
  std::optional<bool> last_want;
  bool alive = true;
  bool beats_hang = false;
  std::vector<caf::response_promise> hanging;
  int beats = 0;
  int registrations = 0;
  std::optional<bool> paused;
};

caf::behavior membership_stand_in(caf::event_based_actor* self,
                                  std::shared_ptr<membership_recorder> rec) {
  return {
      [self, rec](heartbeat_atom, const pb::Heartbeat&) -> caf::result<bool> {
        ++rec->beats;
        if (!rec->beats_hang) return rec->alive;
        rec->hanging.push_back(self->make_response_promise());
        return rec->hanging.back();
      },
      [rec](lead_atom, const pb::Lead& req) -> caf::result<int64_t> {
        if (rec->lead_fails) return caf::make_error(caf::sec::request_receiver_down);
        rec->last_want = req.want();
        return req.want() && rec->lead_answer ? int64_t{7} : int64_t{0};
      },
      [rec](register_atom, const pb::NodeRegistration&) {
        ++rec->registrations;
        return int32_t{0};
      },
      [rec](pause_atom, bool paused) { rec->paused = paused; },
  };
}

}  // namespace

/// A cluster actor on two membership stand-ins (the lease's and the
/// duties'), which also stand in for its pusher.
struct cluster_fixture : flow_fixture {
  void start_cluster(std::chrono::milliseconds interval = 1s,
                     std::chrono::milliseconds lease_time = 5s) {
    lease = sys.spawn(membership_stand_in, rec);
    duties = sys.spawn(membership_stand_in, rec);
    auto co = cluster_options_from(config{});
    co.node = "n1";
    co.incarnation = "0000000000000001";
    co.heartbeat_interval = interval;
    co.lease = lease_time;
    co.storage = caf::actor_cast<membership_storage_actor>(lease);
    co.lead_storage = caf::actor_cast<membership_storage_actor>(duties);
    co.pusher = caf::actor_cast<pusher_actor>(lease);
    cluster = spawn_cluster(sys, co);
    sched.run();
  }

  bool leads() { return ask<pb::HeartbeatAck>(cluster, status_atom_v).leader(); }

  ~cluster_fixture() {
    for (const auto& a : {caf::actor_cast<caf::actor>(cluster), lease, duties})
      if (a) caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
    sched.run();
  }

  std::shared_ptr<membership_recorder> rec = std::make_shared<membership_recorder>();
  caf::actor lease;
  caf::actor duties;
  cluster_actor cluster;
};

BOOST_FIXTURE_TEST_SUITE(cluster_lead, cluster_fixture)

// The heartbeat and the lead go to connections of their own: a node whose
// duties' connection fails gives up the lead and goes on claiming.
BOOST_AUTO_TEST_CASE(the_lead_follows_its_own_connection_and_the_heartbeat_the_claims) {
  start_cluster();
  BOOST_CHECK_EQUAL(rec->beats, 1);
  BOOST_CHECK(leads());
  rec->lead_fails = true;
  sched.trigger_timeout();
  sched.run();
  BOOST_CHECK_EQUAL(rec->beats, 2);
  auto status = ask<pb::HeartbeatAck>(cluster, status_atom_v);
  BOOST_CHECK(status.alive());
  BOOST_CHECK(!status.leader());
  BOOST_CHECK(!rec->paused.value_or(false));
  rec->lead_fails = false;
  sched.trigger_timeout();
  sched.run();
  BOOST_CHECK(leads());
  // Leaving, it asks for the lead no more, and a heartbeat that finds it
  // stopped does not register it again.
  ask<caf::ok_atom>(cluster, leave_atom_v);
  BOOST_CHECK(!leads());
  rec->alive = false;
  sched.trigger_timeout();
  sched.run();
  BOOST_CHECK(!rec->last_want.value_or(true));
  BOOST_CHECK_EQUAL(rec->registrations, 0);
  BOOST_CHECK(!leads());
}

// A heartbeat that hangs fails only with the lease; a leader whose lease ran
// out would take itself for dead. The lead goes half an interval before the
// lease could run out, before the heartbeat has failed and claims pause.
BOOST_AUTO_TEST_CASE(a_leader_whose_heartbeat_hangs_gives_up_the_lead_before_its_lease_ends) {
  start_cluster(100ms, 400ms);
  BOOST_REQUIRE(leads());
  rec->beats_hang = true;
  // The next tick, while the lease still holds: it leads on.
  sched.trigger_timeout();
  sched.run();
  BOOST_CHECK(leads());
  // Its ticks up to 300 ms after the last renewal: it leads on; at 400 ms
  // (its heartbeat's timeout, the lease, 100 ms away) it does not.
  sched.clock().advance_time(200ms);
  sched.run();
  BOOST_CHECK(leads());
  sched.clock().advance_time(100ms);
  sched.run();
  BOOST_CHECK(!leads());
  BOOST_CHECK(!rec->last_want.value_or(true));
  BOOST_CHECK(!rec->paused.has_value());
}

BOOST_AUTO_TEST_SUITE_END()

namespace {

/// The checks an alert storage stand-in was asked for.
struct alert_recorder {
  std::vector<pb::AlertCheck> checks;
};

caf::behavior alert_storage_stand_in(std::shared_ptr<alert_recorder> rec) {
  return {
      [rec](alerts_atom, const pb::AlertCheck& check) {
        rec->checks.push_back(check);
        return pb::AlertRound{};
      },
      [](deliver_atom, const pb::DeliveryResults&) { return int32_t{0}; },
  };
}

}  // namespace

/// An alerter on an alert storage stand-in, checking every second.
struct alerter_fixture : flow_fixture {
  alerter_fixture() {
    storage = sys.spawn(alert_storage_stand_in, rec);
    auto ao = alerter_options_from(config{});
    ao.storage = caf::actor_cast<alert_storage_actor>(storage);
    ao.interval = 1s;
    ao.overdue_check_interval = 5s;
    alerter = spawn_alerter(sys, ao);
  }

  ~alerter_fixture() {
    caf::anon_send_exit(alerter, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(storage, caf::exit_reason::user_shutdown);
    sched.run();
  }

  std::shared_ptr<alert_recorder> rec = std::make_shared<alert_recorder>();
  caf::actor storage;
  alerter_actor alerter;
};

BOOST_FIXTURE_TEST_SUITE(alerts, alerter_fixture)

// The overdue check, a costlier query, runs at its own interval, counted on
// the actor clock: passes between its turns leave it out.
BOOST_AUTO_TEST_CASE(the_overdue_check_runs_at_its_interval_of_the_actor_clock) {
  caf::anon_send(alerter, lead_atom_v, int64_t{3});
  sched.run();
  sched.trigger_timeouts();
  sched.run();
  for (int second = 1; second <= 5; ++second) {
    sched.advance_time(1s);
    sched.run();
  }
  BOOST_REQUIRE_EQUAL(rec->checks.size(), 6u);
  std::vector<bool> overdue;
  for (const auto& c : rec->checks) overdue.push_back(c.check_overdue());
  BOOST_CHECK((overdue == std::vector<bool>{true, false, false, false, false, true}));
  BOOST_CHECK_EQUAL(rec->checks.back().term(), 3);
}

BOOST_AUTO_TEST_SUITE_END()
