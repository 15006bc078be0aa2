#pragma once

#include "config/config.hpp"
#include "messages/actors.hpp"
#include "messages/storage_status.hpp"

#include <caf/fwd.hpp>

#include <array>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace taskmill {

struct storage_options {
  std::string conninfo;
  /// Recorded in the attempt history of outcomes this node reports.
  std::string node;
  std::chrono::milliseconds statement_timeout{30000};
  std::chrono::milliseconds lock_timeout{2000};
  std::chrono::milliseconds reconnect_min{100};
  std::chrono::milliseconds reconnect_max{5000};
  /// LISTEN for wake-ups; off for connection poolers that break LISTEN.
  bool listen = true;
  /// Behind a transaction pooler: nothing is kept in the session.
  bool transaction_pooler = false;
  /// How far ahead a claim looks for the next task to become due: the
  /// pusher's poll interval, after which it looks again anyway.
  std::chrono::milliseconds next_due_horizon{1000};
  /// The reconciler's compensation rules, prepared on every connection.
  std::vector<compensation_rule> rules;
  /// Most rows one compensation pass submits.
  int32_t compensation_batch = 1000;
  /// What a task's waiting reason weighs: the cluster's lease, heartbeat
  /// interval, global running limit (0: none) and priority weights.
  /// The node sets them from its configuration.
  struct waiting_context {
    std::chrono::milliseconds lease{};
    std::chrono::milliseconds heartbeat_interval{};
    int32_t global_limit = 0;
    std::array<int, 5> weights{};
  } waiting;
  /// Where the actor keeps its status for readers that must not wait for
  /// it (readiness); one of its own if none is given.
  std::shared_ptr<shared_storage_status> status;
};

/// Spawns the storage actor on its own thread (libpq blocks). It connects,
/// applies the migrations and then answers requests; while PostgreSQL is
/// unreachable it answers `storage_unavailable` and reconnects with backoff.
storage_actor spawn_storage(caf::actor_system& sys, storage_options options);

}  // namespace taskmill
