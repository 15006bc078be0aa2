#pragma once

#include "messages/actors.hpp"

#include <caf/fwd.hpp>

#include <chrono>
#include <string>
#include <vector>

namespace taskmill {

struct reconciler_options {
  std::chrono::milliseconds interval{30000};
  /// Names of the compensation rules, in storage's order.
  std::vector<std::string> rules;
  compensation_storage_actor storage;
  dispatcher_actor dispatcher;
};

reconciler_actor spawn_reconciler(caf::actor_system& sys, reconciler_options options);

}  // namespace taskmill
