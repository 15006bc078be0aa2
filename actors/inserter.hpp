#pragma once

#include "messages/actors.hpp"
#include "messages/validate.hpp"

#include <caf/fwd.hpp>

#include <memory>

namespace taskmill {

struct node_metrics;

struct inserter_options {
  input_limits limits;
  submission_storage_actor storage;
  wake_listener_actor pusher;
  std::shared_ptr<node_metrics> metrics;
};

inserter_actor spawn_inserter(caf::actor_system& sys, inserter_options options);

}  // namespace taskmill
