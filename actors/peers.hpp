#pragma once

#include "messages/actors.hpp"

#include <caf/fwd.hpp>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace taskmill {

struct config;

struct cluster_refusal;
struct node_metrics;
class refusal_log;

struct peers_options {
  std::string node;
  /// host:port at which the other nodes reach this one.
  std::string address;
  std::string secret;
  std::vector<std::string> seeds;
  /// Link over TLS (CAF's OpenSSL module, loaded with the certificates).
  bool tls{};
  /// How often to look for nodes to link to (and retry failed links, with
  /// backoff up to max_backoff).
  std::chrono::milliseconds interval{};
  std::chrono::milliseconds max_backoff{};
  /// Nodes silent this long are not linked to.
  std::chrono::milliseconds lease{};
  query_storage_actor storage;
  wake_listener_actor pusher;
  dispatcher_actor dispatcher;
  /// Where refused callers are counted and logged.
  std::shared_ptr<node_metrics> metrics;
  std::shared_ptr<refusal_log> refusals;
};

/// The options of its config; the handles are the caller's to set.
peers_options peers_options_from(const config& cfg);

/// Counts a caller refused on the cluster port (by reason) and logs it, once
/// per interval for each address and reason; a link this node dialled that
/// failed its handshake is logged the same way, not counted.
void report_refusal(node_metrics* metrics, refusal_log& log, const cluster_refusal& refusal);

/// Spawns the peers actor; publish it on cluster.listen afterwards.
peers_actor spawn_peers(caf::actor_system& sys, peers_options options);

}  // namespace taskmill
