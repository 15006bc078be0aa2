#pragma once

// Spawning and wiring the actors of one node. `taskmill node` uses it, and so
// do tests that run several nodes in one process.

#include "config/config.hpp"
#include "messages/actors.hpp"

#include <caf/fwd.hpp>

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace taskmill {

struct config_changes;
class http_client;
class http_server;
struct node_metrics;
class node_health;

struct node_actors {
  node_actors();
  node_actors(node_actors&&) noexcept;
  node_actors& operator=(node_actors&&) noexcept;
  ~node_actors();

  /// Set when an actor of the node ended while it ran: the node must stop.
  std::shared_ptr<node_health> health;
  supervisor_actor supervisor;
  std::shared_ptr<node_metrics> metrics;
  std::shared_ptr<http_client> http;
  storage_actor storage;
  /// Connections of their own for submissions, claims and outcomes, so that
  /// PostgreSQL inserts, claims and completes on several cores at once, and
  /// a claim never waits behind a heartbeat, a sweep or a read of the API.
  storage_actor submit_storage;
  storage_actor claim_storage;
  storage_actor outcome_storage;
  /// The heartbeat's connection: a read of the API, a sweep or a
  /// compensation query on the main one, slower than the lease, would
  /// otherwise stop this node's claims and cost it the lead.
  storage_actor lease_storage;
  limiter_actor limiter;
  dispatcher_actor dispatcher;
  progress_actor progress;
  pusher_actor pusher;
  inserter_actor inserter;
  watcher_actor watcher;
  reconciler_actor reconciler;
  cron_actor cron;
  alerter_actor alerter;
  peers_actor peers;
  /// Where the other nodes reach this one, and the port peers is published on.
  std::string cluster_address;
  uint16_t cluster_port = 0;
  /// The cluster port's guard (messages/cluster_port.hpp; 0: none).
  int cluster_watch = 0;
  cluster_actor cluster;
  readiness_actor readiness;
  /// Only under a service manager (actors/service_notifier.hpp).
  service_notifier_actor service_notifier;
  api_actor api;
  std::unique_ptr<http_server> server;
  std::shared_ptr<const config> cfg;
  std::string incarnation;

  /// The port the HTTP API listens on.
  uint16_t api_port() const;
};

/// Starts storage, waits until it is connected and migrated, writes the
/// per-type settings and takes the node's name, then starts the rest, the
/// HTTP API last. While PostgreSQL cannot be reached, or the name is held by
/// an earlier run's lease, it waits and tries again, asking `keep_waiting`
/// (which may block for a moment) whether to go on. Every actor is watched
/// from the start: should one end, `health` fails.
caf::expected<node_actors> start_node(caf::actor_system& sys, std::shared_ptr<const config> cfg,
                                      const std::string& conninfo,
                                      const std::function<bool()>& keep_waiting);

/// Takes what a running node takes of `fresh` (`changes.taken`, see
/// tools/node/config_reload.hpp): the type settings, key spaces and jobs,
/// written to the database as at start (every job checked first), and the
/// running limits with them; the alert rules; the log level. On an error the
/// database refused or was away: the type settings and limits have changed
/// only if the jobs' writes failed after them, nothing else has.
caf::error reload_node(caf::actor_system& sys, node_actors& node, const config& fresh,
                       const config_changes& changes);

/// Stops the node cleanly: claiming and the API first; running executions get
/// node.shutdown_grace to finish, what still runs then goes back to pending;
/// storage last.
void stop_node(caf::actor_system& sys, node_actors& node);

/// Runs `node` until `stop_requested` (asked over and over; it may block for
/// a moment) says so or an actor of the node ends, then stops it. Answers the
/// exit status: 0 when asked to stop, 1 when an actor ended.
int run_until_stopped(caf::actor_system& sys, node_actors& node,
                      const std::function<bool()>& stop_requested);

/// Sets up an actor system for nodes: the message types, CAF's network
/// layer, and link heartbeats, so that a frozen peer counts as gone within
/// seconds (CAF sends none by default). Nodes in one actor system (tests)
/// link without TLS.
void configure_actor_system(caf::actor_system_config& cfg);

/// The same, with TLS for links when `cluster` names certificates.
void configure_actor_system(caf::actor_system_config& cfg, const config::cluster_section& cluster);

/// The per-type settings of `cfg` as written to the database.
pb::TypeSettingsList type_settings(const config& cfg);

/// The config's jobs as a start writes them: each scheduled from now, with
/// the config's other jobs it may name as children; or the first job's
/// problem.
caf::expected<std::vector<pb::Job>> config_jobs(const config& cfg);

}  // namespace taskmill
