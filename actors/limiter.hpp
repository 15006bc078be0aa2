#pragma once

#include "messages/actors.hpp"

#include <caf/fwd.hpp>

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace taskmill {

struct config;

struct limiter_options {
  int64_t node_limit{};
  int32_t global_limit{};
  /// Cluster-wide running limits per type.
  std::map<std::string, int32_t> type_limits;
  /// The types this node runs by configuration; any type when `any_type`.
  bool any_type{};
  std::vector<std::string> types;
};

/// The options of its config but the limits (set_limits); the handles are
/// the caller's to set.
limiter_options limiter_options_from(const config& cfg);

/// The cluster-wide running limits of `settings` (the type settings as
/// written to the database).
void set_limits(limiter_options& options, const pb::TypeSettingsList& settings);

limiter_actor spawn_limiter(caf::actor_system& sys, limiter_options options);

/// The most tasks of the types a node runs that may run at once under the
/// cluster-wide limits of `options`: the global limit, and the sum of the
/// types' limits when each type the node runs (those of executors of limited
/// capacity, the keys of `capacity`, among them) has one; none when neither
/// bounds them.
std::optional<int64_t> most_running_under_limits(const limiter_options& options,
                                                 const std::map<std::string, int32_t>& capacity);

/// The node's tasks in flight, from the limits the limiter's stats give:
/// the use of the node's own limit.
int64_t tasks_in_flight(const pb::Stats& limits);

}  // namespace taskmill
