#pragma once

#include "messages/actors.hpp"

#include <caf/fwd.hpp>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace taskmill {

class http_client;

struct alerter_options {
  alert_storage_actor storage;
  std::shared_ptr<http_client> http;
  /// The rules, as storage/sql/alerts.sql reads them (config's alert_rules_json).
  std::string rules;
  std::vector<std::string> webhooks;
  std::chrono::milliseconds interval{1000};
  std::chrono::milliseconds overdue_check_interval{10000};
  std::chrono::milliseconds delivery_timeout{5000};
  int32_t delivery_attempts = 12;
  std::chrono::milliseconds delivery_backoff{1000};
  std::chrono::milliseconds delivery_backoff_cap{std::chrono::minutes{5}};
  /// Inbox rows, batches and deliveries taken per pass.
  int32_t batch_size = 100;
};

alerter_actor spawn_alerter(caf::actor_system& sys, alerter_options options);

}  // namespace taskmill
