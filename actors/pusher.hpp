#pragma once

#include "messages/actors.hpp"

#include <caf/fwd.hpp>

#include <array>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace taskmill {

struct config;

struct node_metrics;

/// Claims a pusher keeps under way at most while work is due: the next waits
/// in the storage's mailbox as one runs, so that the claims' connection does
/// not idle through the hops between them.
inline constexpr int claims_under_way = 2;

struct pusher_options {
  std::string node;
  int32_t batch_size{};
  // Permits offered to submits of tasks due at once while nothing more is
  // due here; 0: none.
  int32_t hand_off_permits{};
  // The offer holds while this node's heartbeat is younger than this.
  std::chrono::milliseconds offer_fresh{};
  std::chrono::milliseconds poll_interval{};
  std::array<int, 5> weights{};
  claim_storage_actor storage;
  limiter_actor limiter;
  dispatcher_actor dispatcher;
  std::shared_ptr<node_metrics> metrics;
};

/// The options of its config; the handles are the caller's to set.
pusher_options pusher_options_from(const config& cfg);

pusher_actor spawn_pusher(caf::actor_system& sys, pusher_options options);

}  // namespace taskmill
