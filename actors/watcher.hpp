#pragma once

#include "messages/actors.hpp"

#include <caf/fwd.hpp>

#include <chrono>

namespace taskmill {

struct config;

struct watcher_options {
  std::chrono::milliseconds interval{};
  /// A node silent this long is dead; also the grace the node's own
  /// timeouts get before the watcher's.
  std::chrono::milliseconds lease{};
  std::chrono::milliseconds success_retention{};
  std::chrono::milliseconds purge_retention{};
  int32_t batch_size{};
  sweep_storage_actor storage;
};

/// The options of its config; the handles are the caller's to set.
watcher_options watcher_options_from(const config& cfg);

watcher_actor spawn_watcher(caf::actor_system& sys, watcher_options options);

}  // namespace taskmill
