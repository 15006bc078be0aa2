#pragma once

#include "messages/actors.hpp"
#include "messages/storage_status.hpp"

#include <caf/fwd.hpp>

#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace taskmill {

/// A storage actor, and where it keeps its status for readiness to read
/// while it is busy connecting.
struct watched_storage {
  std::string name;
  storage_status_actor actor;
  std::shared_ptr<const shared_storage_status> status;
};

/// What readiness asks: every storage connection's status and every other
/// actor's ping.
struct readiness_options {
  std::vector<watched_storage> storages;
  std::vector<std::pair<std::string, pingable_actor>> pingables;
};

/// Answers /readyz and the service manager (actors/service_notifier.hpp):
/// ready once every actor answers and every storage connection is up and
/// migrated; alive while every actor answers, connected or not, so that a
/// node waiting out a PostgreSQL outage is not restarted for it.
readiness_actor spawn_readiness(caf::actor_system& sys, readiness_options options);

}  // namespace taskmill
