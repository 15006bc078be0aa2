#pragma once

#include "messages/actors.hpp"

#include <caf/fwd.hpp>

#include <array>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace taskmill {

struct node_metrics;

struct pusher_options {
  std::string node;
  int32_t batch_size = 512;
  // Permits offered to submits of tasks due at once while nothing more is
  // due here; 0: none.
  int32_t hand_off_permits = 64;
  // The offer holds while this node's heartbeat is younger than this.
  std::chrono::milliseconds offer_fresh{2000};
  std::chrono::milliseconds poll_interval{1000};
  std::array<int, 5> weights{16, 8, 4, 2, 1};
  claim_storage_actor storage;
  limiter_actor limiter;
  dispatcher_actor dispatcher;
  std::shared_ptr<node_metrics> metrics;
};

pusher_actor spawn_pusher(caf::actor_system& sys, pusher_options options);

}  // namespace taskmill
