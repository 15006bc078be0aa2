#include "actors/cluster.hpp"

#include "config/config.hpp"

#include "actors/metrics/node_metrics.hpp"
#include "messages/errors.hpp"

#include <caf/actor_system.hpp>
#include <caf/typed_event_based_actor.hpp>

#include <prometheus/counter.h>

#include <spdlog/spdlog.h>

#include <random>

namespace taskmill {

struct cluster_state {
  static inline const char* name = "cluster";

  cluster_options options;
  pb::HeartbeatAck last;
  // When a heartbeat was last stored, by the local monotonic clock: the
  // lease this node may count on runs from there.
  caf::actor_clock::time_point last_renewed;
  /// The term of the lead this node holds (0: none), and when the request
  /// that last kept it was sent: the lease in the database runs from later.
  int64_t term = 0;
  caf::actor_clock::time_point lead_renewed;
  bool paused = false;
  bool beating = false;
  bool asking_lead = false;
  bool leaving = false;
  /// The outcome counters as of the last stored heartbeat.
  int64_t stored_succeeded = 0;
  int64_t stored_retried = 0;
  int64_t stored_failed = 0;
};

namespace {

using self_ptr = cluster_actor::stateful_pointer<cluster_state>;
/// Time as CAF's clock tells it: the flow tests advance it.
caf::actor_clock::time_point now(self_ptr self) {
  return self->clock().now();
}

caf::actor_clock::duration_type since_renewed(self_ptr self) {
  return now(self) - self->state.last_renewed;
}

void set_paused(self_ptr self, bool paused) {
  auto& st = self->state;
  if (st.paused == paused) return;
  st.paused = paused;
  self->send(st.options.pusher, pause_atom_v, paused);
}

void set_term(self_ptr self, int64_t term) {
  auto& st = self->state;
  if (st.term == term) return;
  if ((st.term != 0) != (term != 0))
    spdlog::info("cluster: node {} {} the leader", st.options.node,
                 term != 0 ? "is now" : "is no longer");
  st.term = term;
  st.last.set_leader(term != 0);
  for (const auto& duty : st.options.leader_duties) self->send(duty, lead_atom_v, term);
}

/// Declared dead (or the name was taken over): claim nothing until this node
/// is registered again, under a new incarnation.
void register_again(self_ptr self) {
  auto& st = self->state;
  set_paused(self, true);
  set_term(self, 0);
  pb::NodeRegistration reg;
  st.options.incarnation = new_incarnation();
  reg.set_name(st.options.node);
  reg.set_incarnation(st.options.incarnation);
  reg.set_address(st.options.address);
  reg.set_lease_ms(st.options.lease.count());
  reg.set_any_type(st.options.any_type);
  for (const auto& type : st.options.types) reg.add_types(type);
  self->request(st.options.storage, st.options.lease, register_atom_v, reg)
      .then(
          [self](int32_t lost) {
            spdlog::warn(
                "cluster: node {} was declared dead and registered again ({} tasks it held are "
                "retried)",
                self->state.options.node, lost);
            self->state.last.set_alive(true);
            self->state.last_renewed = now(self);
            set_paused(self, false);
          },
          [self](const caf::error& err) {
            spdlog::warn("cluster: cannot register node {} again: {}", self->state.options.node,
                         error_message(err));
          });
}

void beat(self_ptr self) {
  auto& st = self->state;
  if (st.beating) return;
  st.beating = true;
  pb::Heartbeat hb;
  hb.set_name(st.options.node);
  hb.set_incarnation(st.options.incarnation);
  hb.set_leader(st.last.leader());
  int64_t succeeded = 0, retried = 0, failed = 0;
  if (st.options.metrics) {
    const auto& m = *st.options.metrics;
    succeeded = static_cast<int64_t>(m.outcome_succeeded.Value());
    retried = static_cast<int64_t>(m.outcome_retry.Value());
    failed = static_cast<int64_t>(m.outcome_fail.Value());
    hb.set_succeeded(succeeded - st.stored_succeeded);
    hb.set_retried(retried - st.stored_retried);
    hb.set_failed(failed - st.stored_failed);
  }
  auto sent = now(self);
  self->request(st.options.storage, st.options.lease, heartbeat_atom_v, hb)
      .then(
          [self, sent, succeeded, retried, failed](bool alive) {
            auto& st = self->state;
            st.beating = false;
            st.stored_succeeded = succeeded;
            st.stored_retried = retried;
            st.stored_failed = failed;
            if (!alive) {
              if (!st.leaving) register_again(self);
              return;
            }
            st.last.set_alive(true);
            st.last_renewed = sent;
            set_paused(self, false);
          },
          [self](const caf::error& err) {
            auto& st = self->state;
            st.beating = false;
            // Stop claiming while the leader could still see this node alive:
            // one interval before the lease runs out.
            auto doubtful = since_renewed(self) >= st.options.lease - st.options.heartbeat_interval;
            if (doubtful && !st.paused)
              spdlog::warn("cluster: cannot renew the heartbeat of node {}: {}", st.options.node,
                           error_message(err));
            if (doubtful) {
              set_paused(self, true);
              set_term(self, 0);
            }
          });
}

/// Whether this node may lead: not once it is leaving, nor when its lease
/// could run out before the next tick. A heartbeat that hangs fails only with
/// the lease, and a leader whose lease ran out would take itself for dead and
/// hand its running tasks to others. Half an interval short of the lease, so
/// that at a tick the last renewal, an interval before, passes with two missed
/// beats allowed.
bool may_lead(self_ptr self) {
  const auto& st = self->state;
  return !st.paused && !st.leaving &&
         since_renewed(self) < st.options.lease - st.options.heartbeat_interval / 2;
}

/// Whether the lead this node holds is surely still its own in the database:
/// kept by a request sent less than the lease ago, with the same half
/// interval to spare. A leader whose requests hang stops acting here before
/// another may take the lead there.
bool lead_kept(self_ptr self) {
  const auto& st = self->state;
  return st.term != 0 &&
         now(self) - st.lead_renewed < st.options.lease - st.options.heartbeat_interval / 2;
}

/// The lead is asked for where the leader's duties run, apart from the
/// heartbeat: a node whose duties' connection is gone loses it, while it
/// goes on claiming.
void ask_lead(self_ptr self) {
  auto& st = self->state;
  if (st.asking_lead) return;
  st.asking_lead = true;
  pb::Lead req;
  req.set_node(st.options.node);
  req.set_incarnation(st.options.incarnation);
  req.set_want(may_lead(self));
  req.set_lease_ms(st.options.lease.count());
  auto sent = now(self);
  self->request(st.options.lead_storage, st.options.lease, lead_atom_v, req)
      .then(
          [self, sent](int64_t term) {
            auto& st = self->state;
            st.asking_lead = false;
            if (term != 0 && may_lead(self)) {
              st.lead_renewed = sent;
              set_term(self, term);
            } else {
              set_term(self, 0);
            }
          },
          [self](const caf::error&) {
            self->state.asking_lead = false;
            set_term(self, 0);
          });
}

cluster_actor::behavior_type cluster(self_ptr self, cluster_options options) {
  self->state.options = std::move(options);
  self->state.last_renewed = now(self);
  self->state.last.set_alive(true);
  self->send(self, caf::tick_atom_v);
  return {
      [](ping_atom) { return caf::ok_atom_v; },
      [self](status_atom) { return self->state.last; },
      [self](leave_atom) {
        self->state.leaving = true;
        set_term(self, 0);
        return caf::ok_atom_v;
      },
      [self](caf::tick_atom) {
        beat(self);
        if (!may_lead(self) || !lead_kept(self)) set_term(self, 0);
        ask_lead(self);
        self->delayed_send(self, self->state.options.heartbeat_interval, caf::tick_atom_v);
      },
  };
}

}  // namespace

std::string new_incarnation() {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  auto value = rng();
  std::string out(16, '0');
  for (int i = 15; i >= 0; --i, value >>= 4) out[i] = "0123456789abcdef"[value & 15];
  return out;
}

cluster_options cluster_options_from(const config& cfg) {
  cluster_options o;
  o.node = cfg.node.name;
  o.heartbeat_interval = cfg.heartbeat.interval;
  o.lease = cfg.lease();
  auto run_here = types_run_here(cfg);
  o.any_type = run_here.any;
  o.types = run_here.types;
  return o;
}

cluster_actor spawn_cluster(caf::actor_system& sys, cluster_options options) {
  return sys.spawn(cluster, std::move(options));
}

}  // namespace taskmill
