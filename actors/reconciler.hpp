#pragma once

#include "messages/actors.hpp"

#include <caf/fwd.hpp>

#include <chrono>
#include <string>
#include <vector>

namespace taskmill {

struct config;

struct reconciler_options {
  std::chrono::milliseconds interval{};
  /// Names of the compensation rules, in storage's order.
  std::vector<std::string> rules;
  compensation_storage_actor storage;
  dispatcher_actor dispatcher;
};

/// The options of its config; the handles are the caller's to set.
reconciler_options reconciler_options_from(const config& cfg);

reconciler_actor spawn_reconciler(caf::actor_system& sys, reconciler_options options);

}  // namespace taskmill
