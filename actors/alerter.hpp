#pragma once

#include "messages/actors.hpp"

#include <caf/fwd.hpp>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace taskmill {

struct config;

class http_client;

struct alerter_options {
  alert_storage_actor storage;
  std::shared_ptr<http_client> http;
  /// The rules, as storage/sql/alerts.sql reads them (config's alert_rules_json).
  std::string rules;
  std::vector<std::string> webhooks;
  std::chrono::milliseconds interval{};
  std::chrono::milliseconds overdue_check_interval{};
  std::chrono::milliseconds delivery_timeout{};
  int32_t delivery_attempts{};
  std::chrono::milliseconds delivery_backoff{};
  std::chrono::milliseconds delivery_backoff_cap{};
  /// Inbox rows, batches and deliveries taken per pass.
  int32_t batch_size{};
};

/// The options of its config; the handles are the caller's to set.
alerter_options alerter_options_from(const config& cfg);

alerter_actor spawn_alerter(caf::actor_system& sys, alerter_options options);

}  // namespace taskmill
