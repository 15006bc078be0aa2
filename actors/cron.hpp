#pragma once

#include "actors/jobs/firing_plan.hpp"
#include "messages/actors.hpp"

#include <caf/fwd.hpp>

#include <chrono>

namespace taskmill {

struct config;

struct cron_options {
  cron_storage_actor storage;
  misfire_rules misfire;
  /// Nodes silent this long are not live: broadcast shards skip them.
  std::chrono::milliseconds lease{};
  /// Due jobs read per round trip.
  int32_t batch_size{};
  /// The longest sleep, should a change of jobs go unnoticed (no NOTIFY).
  std::chrono::milliseconds longest_sleep{};
};

/// The options of its config; the handles are the caller's to set.
cron_options cron_options_from(const config& cfg);

cron_actor spawn_cron(caf::actor_system& sys, cron_options options);

}  // namespace taskmill
