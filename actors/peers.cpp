#include "actors/peers.hpp"

#include "actors/metrics/node_metrics.hpp"
#include "config/config.hpp"
#include "messages/cluster_port.hpp"
#include "messages/errors.hpp"
#include "messages/peer_proof.hpp"
#include "messages/refusal_log.hpp"
#include "messages/time.hpp"

#include <caf/actor_system.hpp>
#include <caf/io/middleman.hpp>
#include <caf/io/middleman_actor.hpp>
#include <caf/openssl/manager.hpp>
#include <caf/typed_event_based_actor.hpp>

#include <prometheus/counter.h>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>
#include <set>

namespace taskmill {

/// One other node or remote executor, over any number of CAF links (a node
/// and its peer may each have linked to the other).
struct peer {
  std::string address;
  std::string kind;  // node | executor
  std::vector<caf::actor> links;
  int64_t since_us = 0;
  std::string last_error;
};

/// When to try an address again after a failed link.
struct retry {
  std::chrono::steady_clock::time_point next;
  std::chrono::milliseconds delay{0};
};

struct peers_state {
  static inline const char* name = "peers";
  peers_options options;
  /// Callers that said hello, and the nonce they must prove the secret over.
  std::map<caf::actor_addr, std::string> challenges;
  /// Admitted callers and outbound links, by address, with the peer's name.
  std::map<caf::actor_addr, std::string> admitted;
  std::map<std::string, peer> peers;
  /// Addresses with a link attempt under way, and those that failed.
  std::set<std::string> connecting;
  std::map<std::string, retry> retries;
  /// Links to nodes whose admission of this node is being asked.
  std::set<caf::actor_addr> checking;
  uint64_t ticks = 0;
};

namespace {

using self_ptr = peers_actor::stateful_pointer<peers_state>;
using clock = std::chrono::steady_clock;

constexpr auto link_timeout = std::chrono::seconds{10};

bool from_elsewhere(self_ptr self) {
  const auto& sender = self->current_sender();
  return sender && sender->node() != self->node();
}

void mark_up(self_ptr self, const std::string& name, const std::string& address,
             const std::string& kind, caf::actor link) {
  auto& p = self->state.peers[name];
  if (p.links.empty()) {
    p.since_us = wall_clock_micros();
    spdlog::info("peers: {} linked", kind == "node" ? "node " + name : name);
  }
  if (!address.empty()) p.address = address;
  p.kind = kind;
  p.last_error.clear();
  self->state.admitted[link.address()] = name;
  self->monitor(link);
  p.links.push_back(std::move(link));
}

void link_failed(self_ptr self, const std::string& address, const std::string& why) {
  auto& st = self->state;
  st.connecting.erase(address);
  auto& r = st.retries[address];
  r.delay =
      std::min(st.options.max_backoff, r.delay.count() == 0 ? st.options.interval : 2 * r.delay);
  r.next = clock::now() + r.delay;
  for (auto& [name, p] : st.peers)
    if (p.address == address && p.links.empty()) p.last_error = why;
  spdlog::debug("peers: cannot link to {}: {}", address, why);
}

/// Proves the secret to the node published at `address` and has it prove
/// the secret back, then keeps the link.
void handshake(self_ptr self, const std::string& address, peer_actor remote) {
  auto nonce = new_nonce();
  const auto& o = self->state.options;
  self->request(remote, link_timeout, hello_atom_v, o.node, nonce)
      .then(
          [self, address, remote, nonce](const std::string& name, const std::string& their_nonce,
                                         const std::string& proof) {
            const auto& o = self->state.options;
            if (name == o.node) {
              // A seed that is this node itself.
              self->state.connecting.erase(address);
              return;
            }
            if (!same_secret(proof, peer_proof(o.secret, proof_role::answer, nonce, name))) {
              spdlog::warn("peers: {} at {} does not know cluster.secret: not linked", name,
                           address);
              return link_failed(self, address, "it does not know cluster.secret");
            }
            self->request(remote, link_timeout, join_atom_v, o.node, std::string{"node"},
                          peer_proof(o.secret, proof_role::join, their_nonce, o.node))
                .then(
                    [self, address, remote, name](bool admitted) {
                      if (!admitted)
                        return link_failed(self, address, "it refused this node's proof");
                      self->state.connecting.erase(address);
                      self->state.retries.erase(address);
                      mark_up(self, name, address, "node", caf::actor_cast<caf::actor>(remote));
                    },
                    [self, address](const caf::error& err) {
                      link_failed(self, address, error_message(err));
                    });
          },
          [self, address](const caf::error& err) {
            link_failed(self, address, error_message(err));
          });
}

void connect(self_ptr self, const std::string& address) {
  auto& st = self->state;
  if (st.connecting.count(address)) return;
  if (auto r = st.retries.find(address); r != st.retries.end() && clock::now() < r->second.next)
    return;
  // Addresses come from the database too: a bad one is a failed link, not
  // an exception in this actor.
  auto target = parse_listen_address(address, "the address of a node");
  if (!target) return link_failed(self, address, error_message(target.error()));
  st.connecting.insert(address);
  auto& sys = self->home_system();
  auto mm = st.options.tls ? sys.openssl_manager().actor_handle() : sys.middleman().actor_handle();
  self->request(mm, link_timeout, caf::connect_atom_v, target->first, target->second)
      .then(
          [self, address](const caf::node_id&, caf::strong_actor_ptr& ptr,
                          const std::set<std::string>&) {
            auto remote = caf::actor_cast<peer_actor>(std::move(ptr));
            if (!remote) return link_failed(self, address, "no taskmill node listens there");
            handshake(self, address, std::move(remote));
          },
          [self, address](const caf::error& err) {
            link_failed(self, address, error_message(err));
          });
}

bool linked(const peers_state& st, const std::string& name) {
  auto p = st.peers.find(name);
  return p != st.peers.end() && !p->second.links.empty();
}

/// A node links to the others as it starts, so while every known node is
/// linked taskmill.nodes is read only every tenth tick; a node without a
/// link is looked after at every tick.
bool worth_looking(const peers_state& st) {
  if (st.ticks % 10 == 0) return true;
  return std::any_of(st.peers.begin(), st.peers.end(), [](const auto& entry) {
    return entry.second.kind == "node" && entry.second.links.empty();
  });
}

/// Links to the seeds and to the live nodes in taskmill.nodes not yet linked.
void look_for_peers(self_ptr self) {
  auto& st = self->state;
  std::set<std::string> linked_addresses;
  for (const auto& [name, p] : st.peers)
    if (!p.links.empty()) linked_addresses.insert(p.address);
  for (const auto& seed : st.options.seeds)
    if (!linked_addresses.count(seed) && seed != st.options.address) connect(self, seed);
  self->request(st.options.storage, link_timeout, nodes_atom_v, st.options.lease.count())
      .then(
          [self](const pb::NodeList& nodes) {
            auto& st = self->state;
            std::set<std::string> live;
            for (const auto& n : nodes.nodes()) {
              if (n.name() == st.options.node || n.role() == "dead" || n.address().empty())
                continue;
              live.insert(n.name());
              st.peers[n.name()].address = n.address();
              if (st.peers[n.name()].kind.empty()) st.peers[n.name()].kind = "node";
              if (!linked(st, n.name())) connect(self, n.address());
            }
            // Nodes gone from the cluster are no longer waited for.
            for (auto it = st.peers.begin(); it != st.peers.end();)
              it = it->second.kind == "node" && it->second.links.empty() && !live.count(it->first)
                       ? st.peers.erase(it)
                       : std::next(it);
          },
          [](const caf::error& err) {
            spdlog::debug("peers: cannot read the nodes: {}", error_message(err));
          });
}

void forget(self_ptr self, const caf::actor_addr& source, const caf::error& reason) {
  auto& st = self->state;
  auto who = st.admitted.find(source);
  if (who == st.admitted.end()) return;
  auto name = who->second;
  st.admitted.erase(who);
  auto& p = st.peers[name];
  auto& links = p.links;
  links.erase(std::remove_if(links.begin(), links.end(),
                             [&](const caf::actor& a) { return a.address() == source; }),
              links.end());
  if (!links.empty()) return;
  p.since_us = wall_clock_micros();
  p.last_error = error_message(reason);
  spdlog::info("peers: {} lost its link: {}", p.kind == "node" ? "node " + name : name,
               p.last_error);
  if (p.kind == "executor") st.peers.erase(name);
}

/// Asks each linked node whether it still admits this one: a node that
/// dropped its side (CAF's connection staying up) would otherwise ignore
/// this node's wake-ups for as long as the connection lasts.
void check_links(self_ptr self) {
  auto& st = self->state;
  for (const auto& [name, p] : st.peers) {
    if (p.kind != "node") continue;
    for (const auto& link : p.links) {
      if (!st.checking.insert(link.address()).second) continue;
      self->request(caf::actor_cast<peer_actor>(link), link_silence_bound, admitted_atom_v)
          .then(
              [self, link](bool admitted) {
                self->state.checking.erase(link.address());
                if (admitted) return;
                // This node's side goes as if the link had dropped; the next
                // look for peers links again.
                self->demonitor(link);
                forget(self, link.address(),
                       make_error(errc::unavailable, "it no longer admitted this node"));
              },
              // A link that does not answer is CAF's to drop, by its heartbeat.
              [self, addr = link.address()](const caf::error&) {
                self->state.checking.erase(addr);
              });
    }
  }
}

/// Reports a caller that failed the proof of cluster.secret, by the address
/// its connection comes from (by its name where CAF cannot tell).
void refuse_proof(self_ptr self, const caf::node_id& from, const std::string& who) {
  auto report = [self, who](const std::string& address) {
    cluster_refusal r;
    r.address = address;
    r.reason = "bad_proof";
    r.detail = "wrong proof of cluster.secret (" + who + ")";
    const auto& o = self->state.options;
    if (o.refusals) report_refusal(o.metrics.get(), *o.refusals, r);
  };
  self->request(self->home_system().middleman().actor_handle(), link_timeout, caf::get_atom_v, from)
      .then([report](const caf::node_id&, const std::string& host,
                     uint16_t) { report(host.empty() ? "an unknown address" : host); },
            [report, who](const caf::error&) { report(who); });
}

/// The caller's proof over the nonce this node gave it.
bool admit(self_ptr self, const std::string& name, const std::string& kind,
           const std::string& proof) {
  auto& st = self->state;
  auto sender = caf::actor_cast<caf::actor>(self->current_sender());
  auto challenge = st.challenges.find(sender.address());
  if (challenge == st.challenges.end()) return false;
  auto expected = peer_proof(st.options.secret, proof_role::join, challenge->second, name);
  st.challenges.erase(challenge);
  if (!same_secret(proof, expected) || (kind != "node" && kind != "executor") ||
      name == st.options.node) {
    refuse_proof(self, sender.node(), kind + " " + name);
    return false;
  }
  auto key = kind == "executor" ? "executor " + name : name;
  mark_up(self, key, {}, kind, std::move(sender));
  return true;
}

pb::PeerLinks links_of(const peers_state& st) {
  pb::PeerLinks out;
  for (const auto& [name, p] : st.peers) {
    auto l = out.add_links();
    l->set_name(name);
    l->set_address(p.address);
    l->set_kind(p.kind);
    l->set_state(p.links.empty() ? "down" : "up");
    if (p.since_us != 0) set_micros(l->mutable_since(), p.since_us);
    l->set_last_error(p.last_error);
  }
  return out;
}

peers_actor::behavior_type peers(self_ptr self, peers_options options) {
  self->state.options = std::move(options);
  self->set_down_handler([self](caf::down_msg& msg) { forget(self, msg.source, msg.reason); });
  self->send(self, caf::tick_atom_v);
  self->send(self, check_atom_v);
  return {
      [](ping_atom) { return caf::ok_atom_v; },
      [self](hello_atom, const std::string&,
             const std::string& nonce) -> caf::result<std::string, std::string, std::string> {
        auto& st = self->state;
        auto mine = new_nonce();
        st.challenges[caf::actor_cast<caf::actor_addr>(self->current_sender())] = mine;
        return {st.options.node, mine,
                peer_proof(st.options.secret, proof_role::answer, nonce, st.options.node)};
      },
      [self](join_atom, const std::string& name, const std::string& kind,
             const std::string& proof) { return admit(self, name, kind, proof); },
      [self](admitted_atom) {
        return self->state.admitted.count(
                   caf::actor_cast<caf::actor_addr>(self->current_sender())) > 0;
      },
      [self](register_atom, caf::actor executor,
             pb::ExecutorRegistration& reg) -> caf::result<int32_t> {
        auto& st = self->state;
        auto sender = caf::actor_cast<caf::actor_addr>(self->current_sender());
        if (!st.admitted.count(sender))
          return make_error(errc::unauthorized, "join with a proof of cluster.secret first");
        return self->delegate(st.options.dispatcher, register_atom_v,
                              caf::actor_cast<executor_actor>(std::move(executor)), std::move(reg));
      },
      [self](progress_atom, int64_t id, pb::Progress& report) -> caf::result<pb::ResultAck> {
        auto& st = self->state;
        if (!st.admitted.count(caf::actor_cast<caf::actor_addr>(self->current_sender())))
          return make_error(errc::unauthorized, "join with a proof of cluster.secret first");
        return self->delegate(st.options.dispatcher, progress_atom_v, id, std::move(report));
      },
      [self](log_atom, int64_t id, pb::AttemptLog& log) -> caf::result<pb::ResultAck> {
        auto& st = self->state;
        if (!st.admitted.count(caf::actor_cast<caf::actor_addr>(self->current_sender())))
          return make_error(errc::unauthorized, "join with a proof of cluster.secret first");
        return self->delegate(st.options.dispatcher, log_atom_v, id, std::move(log));
      },
      [self](wake_atom) {
        auto& st = self->state;
        // From a peer: wake here. From this node: tell the peers. Nodes in
        // one process (tests) share a CAF node, hence admission decides.
        if (st.admitted.count(caf::actor_cast<caf::actor_addr>(self->current_sender())))
          return self->send(st.options.pusher, wake_atom_v);
        if (from_elsewhere(self)) return;
        for (const auto& [name, p] : st.peers)
          if (p.kind == "node" && !p.links.empty())
            self->send(caf::actor_cast<wake_listener_actor>(p.links.front()), wake_atom_v);
      },
      [self](peers_atom) { return links_of(self->state); },
      [self](check_atom) {
        check_links(self);
        self->delayed_send(self, link_heartbeat_interval, check_atom_v);
      },
      [self](caf::tick_atom) {
        if (worth_looking(self->state)) look_for_peers(self);
        ++self->state.ticks;
        self->delayed_send(self, self->state.options.interval, caf::tick_atom_v);
      },
  };
}

}  // namespace

void report_refusal(node_metrics* metrics, refusal_log& log, const cluster_refusal& refusal) {
  if (metrics && refusal.inbound) metrics->cluster_refused(refusal.reason).Increment();
  auto unlogged = log.record(refusal.address, refusal.reason, refusal_log::clock::now());
  if (!unlogged) return;
  auto line = refusal.inbound ? "peers: refused a caller from " + refusal.address + ": "
                              : "peers: cannot link to " + refusal.address + ": ";
  line += refusal.detail;
  if (*unlogged > 0)
    line += " (and " + std::to_string(*unlogged) + " more times since the last such line)";
  else
    line +=
        " (logged once every " +
        std::to_string(std::chrono::duration_cast<std::chrono::seconds>(log.interval()).count()) +
        " s for this address and reason)";
  // Callers that merely connect and go are everyday (port scans, health
  // checks of load balancers): counted, logged only when asked for.
  if (refusal.reason == "closed_in_handshake")
    spdlog::debug("{}", line);
  else
    spdlog::warn("{}", line);
}

peers_options peers_options_from(const config& cfg) {
  peers_options o;
  o.node = cfg.node.name;
  o.secret = cfg.cluster.secret;
  o.seeds = cfg.cluster.seeds;
  o.tls = cfg.cluster.tls();
  o.interval = cfg.heartbeat.interval;
  o.max_backoff = std::chrono::seconds{10};
  o.lease = cfg.lease();
  return o;
}

peers_actor spawn_peers(caf::actor_system& sys, peers_options options) {
  return sys.spawn(peers, std::move(options));
}

}  // namespace taskmill
