#pragma once

// The node's Prometheus metrics. Counters are atomic, so actors update them
// directly; GET /metrics renders them.

#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <string>

namespace taskmill::pb {
class Stats;
class JobMetrics;
class AlertMetrics;
class PeerLinks;
}  // namespace taskmill::pb

namespace prometheus {
class Registry;
class Counter;
class Gauge;
class Histogram;
template <class T>
class Family;
}  // namespace prometheus

namespace taskmill {

/// Task types and jobs with series of their own in /metrics; the others share
/// type="(other)" or job="(other)", so that a flood of distinct names (from
/// submits, jobs put through the API) grows neither a node's memory nor its
/// scrapes without bound.
inline constexpr size_t metric_names_limit = 100;
inline constexpr const char* other_names_label = "(other)";

/// The metrics of one task type on this node.
struct type_metrics {
  prometheus::Counter& succeeded;
  prometheus::Counter& retry;
  prometheus::Counter& fail;
  /// From dispatch to outcome.
  prometheus::Histogram& execution_seconds;
  /// From due (execute_at) to claimed, by the database's clock.
  prometheus::Histogram& pickup_seconds;
};

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
  prometheus::Counter& handed_off;
  prometheus::Counter& outcome_succeeded;
  prometheus::Counter& outcome_retry;
  prometheus::Counter& outcome_fail;
  prometheus::Counter& outcome_stale;
  prometheus::Counter& executions_cancelled;
  prometheus::Gauge& in_flight;
  prometheus::Gauge& storage_connected;
  prometheus::Gauge& storage_round_trips;
  prometheus::Gauge& storage_statements;
  prometheus::Counter& http_requests;
  prometheus::Counter& http_errors;

  /// The metrics of `type`, made at its first use; past metric_names_limit
  /// types, those of "(other)". Thread-safe.
  type_metrics& of_type(const std::string& type);

  /// Callers refused on the cluster port, by reason (a fixed set: see
  /// cluster_refusal). Thread-safe.
  prometheus::Counter& cluster_refused(const std::string& reason);

  /// The Prometheus text exposition of every metric.
  std::string render() const;

 private:
  prometheus::Family<prometheus::Counter>& task_outcomes_;
  prometheus::Family<prometheus::Histogram>& execution_seconds_;
  prometheus::Family<prometheus::Histogram>& pickup_seconds_;
  prometheus::Family<prometheus::Counter>& cluster_refused_;
  std::mutex types_mutex_;
  std::map<std::string, type_metrics> types_;
};

/// Each job's firings by outcome and its last and next fire time, as the
/// ledger has them (the same on every node), in Prometheus text; past
/// metric_names_limit jobs (by name), the others' firings as "(other)".
std::string render_job_metrics(const pb::JobMetrics& jobs);

/// Alerts by kind and their deliveries by state, as stored, in Prometheus
/// text.
std::string render_alert_metrics(const pb::AlertMetrics& alerts);

/// This node's peer links by kind and state, in Prometheus text.
std::string render_link_metrics(const pb::PeerLinks& links);

/// Live tasks per type and status (the counts; past metric_names_limit
/// types, those with fewest tasks as "(other)") and the use of each running
/// limit (the limiter entries), in Prometheus text.
std::string render_live_metrics(const pb::Stats& live);

}  // namespace taskmill
