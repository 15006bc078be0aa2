#pragma once

#include "actors/jobs/firing_plan.hpp"
#include "messages/actors.hpp"

#include <caf/fwd.hpp>

#include <chrono>

namespace taskmill {

struct cron_options {
  cron_storage_actor storage;
  misfire_rules misfire;
  /// Nodes silent this long are not live: broadcast shards skip them.
  std::chrono::milliseconds lease{5000};
  /// Due jobs read per round trip.
  int32_t batch_size = 1000;
  /// The longest sleep, should a change of jobs go unnoticed (no NOTIFY).
  std::chrono::milliseconds longest_sleep{std::chrono::seconds{30}};
};

cron_actor spawn_cron(caf::actor_system& sys, cron_options options);

}  // namespace taskmill
