#pragma once

#include "messages/actors.hpp"

#include <caf/fwd.hpp>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace taskmill {

struct config;

struct node_metrics;

struct cluster_options {
  std::string node;
  std::string incarnation;
  std::string address;
  std::chrono::milliseconds heartbeat_interval{};
  /// A node silent this long is dead (heartbeat interval x missed beats).
  std::chrono::milliseconds lease{};
  /// The task types this node runs (any, or these), told to the database
  /// when it registers again.
  bool any_type{};
  std::vector<std::string> types;
  /// Where the heartbeat goes: a connection of its own, so that no slow
  /// statement of another holds it up.
  membership_storage_actor storage;
  /// Where the lead is held: the connection of the leader's duties, so that
  /// when it goes, the lead goes to another node.
  membership_storage_actor lead_storage;
  pusher_actor pusher;
  /// Told when this node starts or stops leading.
  std::vector<leader_duty_actor> leader_duties;
  /// Its outcome counters go to the database with each heartbeat.
  std::shared_ptr<node_metrics> metrics;
};

/// The options of its config; the handles are the caller's to set.
cluster_options cluster_options_from(const config& cfg);

cluster_actor spawn_cluster(caf::actor_system& sys, cluster_options options);

/// A fresh incarnation id: 16 hex digits.
std::string new_incarnation();

}  // namespace taskmill
