#pragma once

#include "config/config.hpp"
#include "messages/actors.hpp"

#include <caf/fwd.hpp>

#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace taskmill {

struct node_metrics;

struct api_options {
  std::shared_ptr<const config> cfg;
  std::shared_ptr<node_metrics> metrics;
  /// A node silent this long counts as dead in answers.
  std::chrono::milliseconds lease;
  query_storage_actor storage;
  job_storage_actor jobs;
  workflow_storage_actor workflows;
  key_storage_actor keys;
  inserter_actor inserter;
  dispatcher_actor dispatcher;
  progress_actor progress;
  limiter_actor limiter;
  wake_listener_actor pusher;
  peers_actor peers;
  /// The main connection's status, which /metrics reports.
  storage_status_actor storage_status;
  /// What /readyz asks.
  readiness_actor readiness;
};

api_actor spawn_api(caf::actor_system& sys, api_options options);

/// An endpoint the API answers: a method, a path ("/v1/tasks/{id}"; a final
/// "*" for the console's files), and whether it answers without the token.
struct api_endpoint {
  std::string method;
  std::string path;
  bool open;
};

/// The API's route table, for the check against messages/openapi.json.
std::vector<api_endpoint> api_endpoints();

}  // namespace taskmill
