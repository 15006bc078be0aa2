#pragma once

#include "messages/actors.hpp"

#include <caf/fwd.hpp>

#include <chrono>

namespace taskmill {

struct watcher_options {
  std::chrono::milliseconds interval{1000};
  /// A node silent this long is dead; also the grace the node's own
  /// timeouts get before the watcher's.
  std::chrono::milliseconds lease{5000};
  std::chrono::milliseconds success_retention{std::chrono::hours{24}};
  std::chrono::milliseconds purge_retention{std::chrono::hours{24 * 7}};
  int32_t batch_size = 1000;
  sweep_storage_actor storage;
};

watcher_actor spawn_watcher(caf::actor_system& sys, watcher_options options);

}  // namespace taskmill
