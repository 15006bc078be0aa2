#include "actors/pusher.hpp"

#include "config/config.hpp"

#include "actors/hand_offs/hand_offs.hpp"
#include "actors/limits/fair_shares.hpp"
#include "actors/metrics/node_metrics.hpp"
#include "messages/errors.hpp"

#include <caf/actor_system.hpp>
#include <caf/typed_event_based_actor.hpp>

#include <prometheus/counter.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <utility>

namespace taskmill {

struct pusher_state {
  static inline const char* name = "pusher";

  pusher_options options;
  fair_shares shares{{1, 1, 1, 1, 1}};
  // Rounds (permits, then a claim) under way, claims_under_way at most;
  // wake-ups beyond that start another round once one ends.
  int rounds = 0;
  bool wake_pending = false;
  // Only the newest timer counts; older ones find a newer generation.
  uint64_t timer_generation = 0;
  bool storage_failing = false;
  bool paused = false;
  // The last claim answered took fewer tasks than it had permits for.
  bool last_claim_short = false;
  // A claim's answer was lost (its connection broke under it) and its tasks
  // not yet looked for: it may have committed.
  bool claims_in_doubt = false;
  // This node's offer to submits of tasks due at once and the permits that
  // follow its hand-offs.
  hand_offs offers{0, 0};
  // Claims sent so far: an offer is made once none was sent for a while.
  uint64_t claims_sent = 0;
  // A round found no permits: the limiter wakes it when a task's permit
  // comes back, but not for permits this pusher gives back itself.
  bool waiting_for_permits = false;
  // The pause before claiming work that is due but that the last claim did
  // not take (pause_for_due_work).
  std::chrono::milliseconds due_work_pause{0};
};

namespace {

using self_ptr = pusher_actor::stateful_pointer<pusher_state>;

void arm_timer(self_ptr self, std::chrono::milliseconds delay) {
  auto generation = ++self->state.timer_generation;
  self->delayed_send(self, delay, caf::tick_atom_v, generation);
}

void claim_round(self_ptr self);

/// Rounds up to the most in flight, after a full claim: more is due.
void claim_rounds(self_ptr self) {
  while (self->state.rounds < claims_under_way && !self->state.paused) claim_round(self);
}

/// The wait before the next claim, by when work is `next` due. Work due
/// already that the last claim did not take (its type at a limit, its tasks
/// locked by another node's claim) is tried again after 5 ms, then after a
/// pause that doubles at each claim that takes nothing, up to the poll
/// interval, so that a type held at its limit while its tasks come due does
/// not cost a claim and a read every few milliseconds. The pause never runs
/// past the next due time still to come, and starts over once a claim takes
/// work or none waits.
std::chrono::milliseconds pause_for_due_work(pusher_state& st, const pb::NextDue& next) {
  auto poll = st.options.poll_interval;
  auto shortest = std::min(std::chrono::milliseconds{5}, poll);
  auto to_come =
      next.next_due_in_ms() >= 0 ? std::chrono::milliseconds{next.next_due_in_ms()} : poll;
  to_come = std::clamp(to_come, shortest, poll);
  if (!next.due_now()) {
    st.due_work_pause = std::chrono::milliseconds{0};
    return to_come;
  }
  st.due_work_pause =
      st.due_work_pause.count() == 0 ? shortest : std::min(2 * st.due_work_pause, poll);
  return std::min(st.due_work_pause, to_come);
}

/// After the last round under way found all it could: the next one starts at
/// `next`, or at once for a wake-up that came meanwhile.
void wait_for_work(self_ptr self, const pb::NextDue& next) {
  auto& st = self->state;
  if (st.rounds > 0) return;
  if (st.wake_pending) {
    claim_round(self);
    return;
  }
  arm_timer(self, pause_for_due_work(st, next));
  // Only a node that stays idle offers: one between bursts (submits in
  // batches while it works) would write and take back an offer each time,
  // on the claims' connection.
  constexpr auto idle_before_offer = std::chrono::milliseconds{20};
  if (st.offers.wants_offer())
    self->delayed_send(self, idle_before_offer, offer_atom_v, st.claims_sent);
}

/// A claim with the next due time asked for beside it: whichever answer
/// comes second may end the round.
struct claim_and_next_due {
  bool claim_short = false;  // once the claim came back short
  std::optional<pb::NextDue> next_due;
};

/// A claim that took fewer tasks than it had permits for found all it could:
/// the round ends once the time of the next due task is known. It is asked
/// after such a claim's answer, or, for `beside` a claim, with it.
void ask_next_due(self_ptr self, const pb::ClaimRequest& req,
                  std::shared_ptr<claim_and_next_due> beside = nullptr) {
  auto answered = [self, beside](const pb::NextDue& next) {
    if (!beside) return wait_for_work(self, next);
    beside->next_due = next;
    if (beside->claim_short) wait_for_work(self, next);
  };
  self->request(self->state.options.storage, local_request_timeout, next_due_atom_v, req)
      .then([answered](const pb::NextDue& next) { answered(next); },
            [answered](const caf::error& err) {
              spdlog::warn("pusher: no next due time after a claim: {}", error_message(err));
              pb::NextDue unknown;
              unknown.set_next_due_in_ms(-1);
              answered(unknown);
            });
}

/// Claims under a running limit or on executors of limited capacity come back
/// short for want of room, with more due (see taskmill.claim_by_turns).
bool limits_apply(const pb::ClaimGrant& grant) {
  return grant.global_limit() > 0 || grant.type_limits_size() > 0 || grant.executor_room_size() > 0;
}

/// What a grant holds at the limiter (its permits, its executor places), to
/// be settled with what its claim took.
pb::PermitUse held_by(const pb::ClaimGrant& grant) {
  pb::PermitUse use;
  use.set_permits(grant.permits());
  *use.mutable_executor_room() = grant.executor_room();
  return use;
}

/// Permits this pusher held beside its claims (for an offer, or kept for
/// hand-offs) go back; a round that waited for permits claims again.
void give_back_permits(self_ptr self, int32_t permits) {
  auto& st = self->state;
  if (permits <= 0) return;
  pb::PermitUse back;
  back.set_permits(permits);
  self->send(st.options.limiter, settle_atom_v, std::move(back));
  if (!std::exchange(st.waiting_for_permits, false)) return;
  claim_round(self);
}

/// Permits kept for hand-offs not heard of go back in a few seconds at most,
/// as a commit that took a permit may yet fail.
void release_later(self_ptr self, const hand_offs::kept& kept) {
  if (kept.permits <= 0) return;
  constexpr auto hand_offs_heard_within = std::chrono::seconds{5};
  self->delayed_send(self, hand_offs_heard_within, release_atom_v, kept.generation);
}

/// A claim whose answer was lost may have committed: its tasks run here by
/// the database, unknown to the dispatcher, until their timeout (hours, for
/// some types), as do hand-offs whose notifications the listener missed.
/// Once claims are answered again, the dispatcher is handed what runs here
/// to run those it does not know. It hears of them after the tasks
/// of every claim answered before, and later claims' tasks are not among them.
void adopt_claims_in_doubt(self_ptr self) {
  auto& st = self->state;
  st.claims_in_doubt = false;
  self->request(st.options.storage, local_request_timeout, running_atom_v, st.options.node)
      .then(
          [self](pb::Executions& running) {
            running.set_permits_held(self->state.offers.read_what_runs());
            if (running.task_ids_size() > 0 || running.permits_held() > 0)
              self->send(self->state.options.dispatcher, adopt_atom_v, std::move(running));
          },
          [self](const caf::error& err) {
            spdlog::warn("pusher: cannot read the tasks running here: {}", error_message(err));
            self->state.claims_in_doubt = true;
          });
}

/// Permits asked of the limiter for the offer: `use(grant)` if it is still
/// wanted, else they go back.
template <class Use>
void ask_offer_permits(self_ptr self, int32_t wanted, Use use) {
  auto& st = self->state;
  st.offers.asking(true);
  self->request(st.options.limiter, local_request_timeout, acquire_atom_v, wanted)
      .then(
          [self, use](pb::ClaimGrant& grant) {
            auto& st = self->state;
            st.offers.asking(false);
            if (grant.permits() <= 0 || limits_apply(grant) || st.paused || !use(grant))
              self->send(st.options.limiter, settle_atom_v, held_by(grant));
          },
          [self](const caf::error& err) {
            self->state.offers.asking(false);
            spdlog::error("pusher: limiter failed: {}", error_message(err));
          });
}

/// A node that claimed all it could offers permits to submits of tasks due
/// at once (storage/sql/offers.sql). The offer stands through claims that
/// find little (a poll, a retry come due), lest the submits in between miss
/// it; a claim after one that took all it had permits for takes it back and
/// its permits over. Not under limits: they are counted in claims. No offer
/// is made while a claim is under way, so that one whose answer is lost
/// finds the offer it took back still this node's.
void offer_permits(self_ptr self) {
  auto& st = self->state;
  auto wanted = st.offers.permits_to_offer();
  if (wanted <= 0 || st.paused) return;
  ask_offer_permits(self, wanted, [self](pb::ClaimGrant& grant) {
    auto& st = self->state;
    if (st.rounds > 0) return false;
    auto made = st.offers.make(grant.permits());
    if (!made) return false;
    pb::ClaimRequest offer;
    offer.set_node(st.options.node);
    offer.set_offer_generation(made->generation);
    offer.set_offer_fresh_ms(static_cast<int32_t>(st.options.offer_fresh.count()));
    *offer.mutable_grant() = std::move(grant);
    self->request(st.options.storage, local_request_timeout, make_offer_atom_v, offer)
        .then(
            [self, made = *made](bool stored) {
              if (!stored)
                give_back_permits(self, self->state.offers.refused(made.generation, made.permits));
            },
            [self, generation = made->generation](const caf::error& err) {
              spdlog::debug("pusher: cannot offer permits: {}", error_message(err));
              self->state.offers.in_doubt(generation);
            });
    return true;
  });
}

/// Once hand-offs took half the offer's permits over, as many are added to it.
void top_up_offer(self_ptr self) {
  auto& st = self->state;
  auto wanted = st.offers.to_top_up();
  if (wanted.permits <= 0 || st.paused) return;
  ask_offer_permits(self, wanted.permits, [self, wanted](pb::ClaimGrant& grant) {
    auto& st = self->state;
    hand_offs::offer more{wanted.generation, grant.permits()};
    if (!st.offers.top_up(more.generation, more.permits)) return false;
    self->request(st.options.storage, local_request_timeout, top_up_atom_v, st.options.node,
                  more.generation, more.permits)
        .then(
            [self, more](bool stored) {
              if (!stored)
                give_back_permits(self, self->state.offers.refused(more.generation, more.permits));
            },
            [self, generation = more.generation](const caf::error& err) {
              spdlog::debug("pusher: cannot add to the offer: {}", error_message(err));
              self->state.offers.in_doubt(generation);
            });
    return true;
  });
}

/// Tasks handed to this node run, on the permits the offer held for them
/// where it did (hand_offs::heard).
void run_handed(self_ptr self, pb::HandOffs& heard) {
  auto& st = self->state;
  auto run = st.offers.heard(heard);
  st.options.metrics->claimed.Increment(run.task_ids_size());
  st.options.metrics->handed_off.Increment(run.task_ids_size());
  self->send(st.options.dispatcher, adopt_atom_v, std::move(run));
  top_up_offer(self);
}

/// A node takes its offer back when its lease is in doubt, lest submits hand
/// it tasks then, and when limits came to apply. Should the answer not come,
/// its permits stay held for the next claim, which takes it back again and
/// counts what submits took of them.
void withdraw_offer(self_ptr self) {
  auto& st = self->state;
  auto withdrawn = st.offers.withdraw();
  if (!withdrawn) return;
  self->request(st.options.storage, local_request_timeout, take_back_atom_v, st.options.node,
                withdrawn->permits)
      .then(
          [self, withdrawn = *withdrawn](int32_t taken) {
            auto settled = self->state.offers.withdrawn(withdrawn, taken);
            release_later(self, settled.keep);
            give_back_permits(self, settled.free);
          },
          [](const caf::error& err) {
            spdlog::debug("pusher: cannot take the offer back: {}", error_message(err));
          });
}

void on_claimed(self_ptr self, const pb::ClaimRequest& req, pb::ClaimedTasks& claimed,
                const std::shared_ptr<claim_and_next_due>& beside) {
  auto& st = self->state;
  --st.rounds;
  if (st.storage_failing) {
    spdlog::info("pusher: claiming again");
    st.storage_failing = false;
  }
  fair_shares::counts got{};
  auto use = held_by(req.grant());
  if (req.offered() > 0) {
    auto kept = st.offers.claim_took_back({req.offer_generation(), req.offered()},
                                          claimed.handed_unheard());
    use.set_permits(use.permits() - kept.permits);
    release_later(self, kept);
  }
  if (claimed.tasks_size() > 0) st.due_work_pause = std::chrono::milliseconds{0};
  for (const auto& task : claimed.tasks()) {
    auto level = task.priority() - 1;
    if (level >= 0 && level < fair_shares::levels) ++got[level];
    use.add_claimed_types(task.type());
  }
  use.set_keyed(claimed.keyed());
  st.shares.settle({req.turns().begin(), req.turns().end()}, claimed.turns_taken(), got);
  st.options.metrics->claim_rounds.Increment();
  st.options.metrics->claimed.Increment(claimed.tasks_size());
  self->send(st.options.limiter, settle_atom_v, std::move(use));
  // A claim that took the offer over had room for its permits less what
  // submits took of it unheard.
  bool full = claimed.tasks_size() >= req.grant().permits() - claimed.handed_unheard();
  st.last_claim_short = !full;
  if (claimed.tasks_size() > 0) {
    pb::TaskList list;
    list.mutable_tasks()->Swap(claimed.mutable_tasks());
    self->send(st.options.dispatcher, dispatch_atom_v, std::move(list));
  }
  if (st.claims_in_doubt) adopt_claims_in_doubt(self);
  if (beside) beside->claim_short = !full;
  if (full)
    claim_rounds(self);
  else if (st.wake_pending)
    claim_round(self);
  else if (st.rounds > 0)
    return;
  else if (!beside)
    ask_next_due(self, req);
  else if (beside->next_due)
    wait_for_work(self, *beside->next_due);
}

void claim_with(self_ptr self, pb::ClaimGrant grant) {
  auto& st = self->state;
  // After a claim that took all it could, once the offer was taken back, or
  // when permits are short (the offer may hold them all), its permits join
  // the claim, which takes it back first.
  auto over = st.offers.take_over(st.last_claim_short, grant.permits() < st.options.batch_size);
  // Limits came to apply (an executor of limited capacity registered): the
  // offer, made without them, is taken back.
  if (limits_apply(grant)) withdraw_offer(self);
  grant.set_permits(grant.permits() + over.permits);
  auto permits = grant.permits();
  if (permits <= 0) {
    self->send(st.options.limiter, settle_atom_v, held_by(grant));
    --st.rounds;
    st.waiting_for_permits = true;
    return;
  }
  // Kept once for both answers (the turns are a number per permit).
  auto req = std::make_shared<pb::ClaimRequest>();
  req->set_node(st.options.node);
  req->set_after_short_claim(st.last_claim_short);
  req->set_offered(over.permits);
  req->set_offer_generation(over.generation);
  *req->mutable_grant() = std::move(grant);
  for (auto level : st.shares.turns(permits)) req->add_turns(level);
  // Without limits, a claim after a short one (a pickup) likely comes back
  // short too: the next due time is asked for with it and read in the same
  // round trip, instead of asked once the claim is answered, when the
  // dispatcher waited for that ask to go out before it could start the
  // claim's tasks. Under limits claims come back short with more due; they
  // ask after their answer, and only when it is short.
  auto beside = req->after_short_claim() && !limits_apply(req->grant())
                    ? std::make_shared<claim_and_next_due>()
                    : nullptr;
  self->request(st.options.storage, local_request_timeout, claim_atom_v, *req)
      .then([self, req,
             beside](pb::ClaimedTasks& claimed) { on_claimed(self, *req, claimed, beside); },
            [self, req](const caf::error& err) {
              auto& st = self->state;
              // The offer may stand yet: its permits stay held for the next
              // claim to take it back (no other was made meanwhile).
              auto use = held_by(req->grant());
              if (req->offer_generation() != 0) use.set_permits(use.permits() - req->offered());
              st.offers.claim_lost({req->offer_generation(), req->offered()});
              self->send(st.options.limiter, settle_atom_v, std::move(use));
              st.claims_in_doubt = true;
              if (!st.storage_failing) {
                spdlog::warn("pusher: cannot claim: {}", error_message(err));
                st.storage_failing = true;
              }
              --st.rounds;
              st.wake_pending = false;
              arm_timer(self, st.options.poll_interval);
            });
  if (beside) ask_next_due(self, *req, beside);
}

void claim_round(self_ptr self) {
  auto& st = self->state;
  if (st.paused) return;
  if (st.rounds >= claims_under_way) {
    st.wake_pending = true;
    return;
  }
  ++st.rounds;
  ++st.claims_sent;
  st.wake_pending = false;
  self->request(st.options.limiter, local_request_timeout, acquire_atom_v, st.options.batch_size)
      .then([self](pb::ClaimGrant& grant) { claim_with(self, std::move(grant)); },
            [self](const caf::error& err) {
              spdlog::error("pusher: limiter failed: {}", error_message(err));
              --self->state.rounds;
              arm_timer(self, self->state.options.poll_interval);
            });
}

pusher_actor::behavior_type pusher(pusher_actor::stateful_pointer<pusher_state> self,
                                   pusher_options options) {
  self->state.shares = fair_shares{options.weights};
  self->state.offers =
      hand_offs{options.hand_off_permits, std::chrono::duration_cast<std::chrono::microseconds>(
                                              std::chrono::system_clock::now().time_since_epoch())
                                              .count()};
  self->state.options = std::move(options);
  claim_round(self);
  return {
      [](ping_atom) { return caf::ok_atom_v; },
      [self](wake_atom) { claim_round(self); },
      [self](hand_off_atom, pb::HandOffs& heard) { run_handed(self, heard); },
      [self](adopt_atom) {
        self->state.offers.listener_connected();
        self->state.claims_in_doubt = true;
        claim_round(self);
      },
      [self](pause_atom, bool pause) {
        if (self->state.paused == pause) return;
        self->state.paused = pause;
        if (pause) {
          spdlog::warn("pusher: claiming paused: this node's lease is in doubt");
          withdraw_offer(self);
        } else {
          spdlog::info("pusher: claiming again");
          claim_round(self);
        }
      },
      [self](offer_atom, uint64_t claims_sent) {
        if (claims_sent == self->state.claims_sent) offer_permits(self);
      },
      [self](release_atom, int64_t generation) {
        give_back_permits(self, self->state.offers.release(generation));
      },
      [self](caf::tick_atom, uint64_t generation) {
        if (generation == self->state.timer_generation) claim_round(self);
      },
  };
}

}  // namespace

pusher_options pusher_options_from(const config& cfg) {
  pusher_options o;
  o.node = cfg.node.name;
  o.batch_size = cfg.scheduling.batch_size;
  // A node that does not LISTEN would not hear of the tasks handed to it.
  o.hand_off_permits = cfg.database.listen ? cfg.scheduling.hand_off_permits : 0;
  // A node that missed two heartbeats is handed nothing more.
  o.offer_fresh = 3 * cfg.heartbeat.interval;
  o.poll_interval = cfg.scheduling.poll_interval;
  o.weights = cfg.scheduling.weights;
  return o;
}

pusher_actor spawn_pusher(caf::actor_system& sys, pusher_options options) {
  return sys.spawn(pusher, std::move(options));
}

}  // namespace taskmill
