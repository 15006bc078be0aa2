#pragma once

#include "messages/actors.hpp"

#include <caf/fwd.hpp>

#include <map>
#include <string>
#include <vector>

namespace taskmill {

struct limiter_options {
  int64_t node_limit = 2048;
  int32_t global_limit = 0;
  /// Cluster-wide running limits per type.
  std::map<std::string, int32_t> type_limits;
  /// The types this node runs by configuration; any type when `any_type`.
  bool any_type = false;
  std::vector<std::string> types;
};

limiter_actor spawn_limiter(caf::actor_system& sys, limiter_options options);

}  // namespace taskmill
