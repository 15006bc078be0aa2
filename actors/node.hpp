#pragma once

// Spawning and wiring the actors of one node. `taskmill node` uses it, and so
// do tests that run several nodes in one process.

#include "config/config.hpp"
#include "messages/actors.hpp"

#include <caf/fwd.hpp>

#include <functional>
#include <memory>
#include <string>

namespace taskmill {

class http_client;
class http_server;
struct node_metrics;

struct node_actors {
  node_actors();
  node_actors(node_actors&&) noexcept;
  node_actors& operator=(node_actors&&) noexcept;
  ~node_actors();

  std::shared_ptr<node_metrics> metrics;
  std::shared_ptr<http_client> http;
  storage_actor storage;
  /// Connections of their own for submissions and for outcomes, so that
  /// PostgreSQL inserts, claims and completes on several cores at once.
  storage_actor submit_storage;
  storage_actor outcome_storage;
  limiter_actor limiter;
  dispatcher_actor dispatcher;
  pusher_actor pusher;
  inserter_actor inserter;
  watcher_actor watcher;
  reconciler_actor reconciler;
  cluster_actor cluster;
  api_actor api;
  std::unique_ptr<http_server> server;
  std::shared_ptr<const config> cfg;
  std::string incarnation;

  /// The port the HTTP API listens on.
  uint16_t api_port() const;
};

/// Starts storage, waits until it is connected and migrated (asking
/// `keep_waiting` every half second whether to go on), writes the per-type
/// settings, then starts the rest, the HTTP API last.
caf::expected<node_actors> start_node(caf::actor_system& sys, std::shared_ptr<const config> cfg,
                                      const std::string& conninfo,
                                      const std::function<bool()>& keep_waiting);

/// Stops the node cleanly: claiming and the API first; running executions get
/// node.shutdown_grace to finish, what still runs then goes back to pending;
/// storage last.
void stop_node(caf::actor_system& sys, node_actors& node);

/// The per-type settings of `cfg` as written to the database.
pb::TypeSettingsList type_settings(const config& cfg);

}  // namespace taskmill
