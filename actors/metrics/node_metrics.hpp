#pragma once

// The node's Prometheus metrics. Counters are atomic, so actors update them
// directly; GET /metrics renders them.

#include <memory>
#include <string>

namespace taskmill::pb {
class JobMetrics;
class AlertMetrics;
class PeerLinks;
}  // namespace taskmill::pb

namespace prometheus {
class Registry;
class Counter;
class Gauge;
class Histogram;
}  // namespace prometheus

namespace taskmill {

struct node_metrics {
  node_metrics();
  ~node_metrics();

  std::shared_ptr<prometheus::Registry> registry;

  prometheus::Counter& submitted_created;
  prometheus::Counter& submitted_replaced;
  prometheus::Counter& submitted_duplicate;
  prometheus::Counter& submitted_stale;
  prometheus::Counter& claim_rounds;
  prometheus::Counter& claimed;
  prometheus::Counter& outcome_succeeded;
  prometheus::Counter& outcome_retry;
  prometheus::Counter& outcome_fail;
  prometheus::Counter& outcome_stale;
  prometheus::Histogram& execution_seconds;
  prometheus::Gauge& in_flight;
  prometheus::Gauge& storage_connected;
  prometheus::Gauge& storage_round_trips;
  prometheus::Gauge& storage_statements;
  prometheus::Counter& http_requests;
  prometheus::Counter& http_errors;

  /// The Prometheus text exposition of every metric.
  std::string render() const;
};

/// Each job's firings by outcome and its last and next fire time, as the
/// ledger has them (the same on every node), in Prometheus text.
std::string render_job_metrics(const pb::JobMetrics& jobs);

/// Alerts by kind and their deliveries by state, as stored, in Prometheus
/// text.
std::string render_alert_metrics(const pb::AlertMetrics& alerts);

/// This node's peer links by kind and state, in Prometheus text.
std::string render_link_metrics(const pb::PeerLinks& links);

}  // namespace taskmill
