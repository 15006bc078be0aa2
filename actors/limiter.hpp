#pragma once

#include "messages/actors.hpp"

#include <caf/fwd.hpp>

#include <map>
#include <string>

namespace taskmill {

struct limiter_options {
  int64_t node_limit = 2048;
  int32_t global_limit = 0;
  std::map<std::string, int32_t> type_limits;
};

limiter_actor spawn_limiter(caf::actor_system& sys, limiter_options options);

}  // namespace taskmill
