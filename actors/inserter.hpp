#pragma once

#include "messages/actors.hpp"
#include "messages/validate.hpp"

#include <caf/fwd.hpp>

#include <memory>
#include <vector>

namespace taskmill {

struct node_metrics;

struct inserter_options {
  input_limits limits;
  submission_storage_actor storage;
  /// Told when due work may have arrived: the pusher, and the peers.
  std::vector<wake_listener_actor> wake;
  std::shared_ptr<node_metrics> metrics;
};

inserter_actor spawn_inserter(caf::actor_system& sys, inserter_options options);

}  // namespace taskmill
