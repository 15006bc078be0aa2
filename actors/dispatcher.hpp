#pragma once

#include "config/config.hpp"
#include "messages/actors.hpp"

#include <caf/fwd.hpp>

#include <memory>
#include <string>

namespace taskmill {

class http_client;
struct node_metrics;

struct dispatcher_options {
  std::string node;
  /// Executors and timeouts per type; read only.
  std::shared_ptr<const config> cfg;
  outcome_storage_actor storage;
  limiter_actor limiter;
  /// Where executors' progress reports go.
  progress_actor progress;
  std::shared_ptr<http_client> http;
  std::shared_ptr<node_metrics> metrics;
};

dispatcher_actor spawn_dispatcher(caf::actor_system& sys, dispatcher_options options);

}  // namespace taskmill
