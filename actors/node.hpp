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

struct node_actors {
  storage_actor storage;
  limiter_actor limiter;
  dispatcher_actor dispatcher;
  pusher_actor pusher;
  inserter_actor inserter;
};

/// Starts storage, waits until it is connected and migrated (asking
/// `keep_waiting` every half second whether to go on), writes the per-type
/// settings, then starts the rest.
caf::expected<node_actors> start_node(caf::actor_system& sys, std::shared_ptr<const config> cfg,
                                      const std::string& conninfo,
                                      const std::function<bool()>& keep_waiting);

/// Stops the actors, claiming first, storage last.
void stop_node(const node_actors& node);

/// The per-type settings of `cfg` as written to the database.
pb::TypeSettingsList type_settings(const config& cfg);

}  // namespace taskmill
