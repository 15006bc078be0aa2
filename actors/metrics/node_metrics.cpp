#include "actors/metrics/node_metrics.hpp"

#include "messages/names.hpp"
#include "node.pb.h"

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <algorithm>
#include <map>
#include <set>
#include <utility>
#include <vector>

namespace taskmill {

namespace {

prometheus::Counter& counter(prometheus::Registry& r, const std::string& name,
                             const std::string& help, const prometheus::Labels& labels = {}) {
  return prometheus::BuildCounter().Name(name).Help(help).Register(r).Add(labels);
}

prometheus::Gauge& gauge(prometheus::Registry& r, const std::string& name,
                         const std::string& help) {
  return prometheus::BuildGauge().Name(name).Help(help).Register(r).Add({});
}

}  // namespace

node_metrics::node_metrics()
    : registry(std::make_shared<prometheus::Registry>()),
      submitted_created(counter(*registry, "taskmill_submits_total", "Submits by outcome",
                                {{"outcome", "created"}})),
      submitted_replaced(counter(*registry, "taskmill_submits_total", "Submits by outcome",
                                 {{"outcome", "replaced"}})),
      submitted_duplicate(counter(*registry, "taskmill_submits_total", "Submits by outcome",
                                  {{"outcome", "duplicate"}})),
      submitted_stale(counter(*registry, "taskmill_submits_total", "Submits by outcome",
                              {{"outcome", "stale"}})),
      claim_rounds(counter(*registry, "taskmill_claim_rounds_total", "Claim statements sent")),
      claimed(counter(*registry, "taskmill_claimed_total",
                      "Tasks claimed by this node, or for it by submits (hand-offs)")),
      handed_off(counter(*registry, "taskmill_handed_off_total",
                         "Tasks handed to this node by submits, a claim made in the submit")),
      outcome_succeeded(counter(*registry, "taskmill_outcomes_total", "Outcomes stored",
                                {{"outcome", "succeeded"}})),
      outcome_retry(
          counter(*registry, "taskmill_outcomes_total", "Outcomes stored", {{"outcome", "retry"}})),
      outcome_fail(
          counter(*registry, "taskmill_outcomes_total", "Outcomes stored", {{"outcome", "fail"}})),
      outcome_stale(
          counter(*registry, "taskmill_outcomes_total", "Outcomes stored", {{"outcome", "stale"}})),
      executions_cancelled(counter(
          *registry, "taskmill_executions_cancelled_total",
          "Executions stopped here, or kept from starting, because their task was cancelled", {})),
      in_flight(gauge(*registry, "taskmill_in_flight", "Tasks in flight on this node")),
      storage_connected(
          gauge(*registry, "taskmill_storage_connected", "1 while PostgreSQL is connected")),
      storage_round_trips(gauge(*registry, "taskmill_storage_round_trips",
                                "Round trips to PostgreSQL since start")),
      storage_statements(
          gauge(*registry, "taskmill_storage_statements", "Statements run since start")),
      http_requests(counter(*registry, "taskmill_http_requests_total", "API requests answered")),
      http_errors(counter(*registry, "taskmill_http_errors_total",
                          "API requests answered with 4xx or 5xx")),
      task_outcomes_(prometheus::BuildCounter()
                         .Name("taskmill_task_outcomes_total")
                         .Help("Outcomes of executions on this node, by task type")
                         .Register(*registry)),
      execution_seconds_(prometheus::BuildHistogram()
                             .Name("taskmill_execution_seconds")
                             .Help("Time from dispatch to outcome, by task type")
                             .Register(*registry)),
      pickup_seconds_(prometheus::BuildHistogram()
                          .Name("taskmill_pickup_seconds")
                          .Help("Time from due (execute_at) to claimed, by task type")
                          .Register(*registry)),
      cluster_refused_(prometheus::BuildCounter()
                           .Name("taskmill_cluster_refused_total")
                           .Help("Callers refused on the cluster port, by reason")
                           .Register(*registry)) {}

prometheus::Counter& node_metrics::cluster_refused(const std::string& reason) {
  return cluster_refused_.Add({{"reason", reason}});
}

type_metrics& node_metrics::of_type(const std::string& type) {
  std::lock_guard<std::mutex> guard{types_mutex_};
  if (auto it = types_.find(type); it != types_.end()) return it->second;
  const std::string name = types_.size() < metric_names_limit ? type : other_names_label;
  if (auto it = types_.find(name); it != types_.end()) return it->second;
  // Executions run from under a millisecond (built-ins) to minutes (HTTP
  // work); pickups from a millisecond (woken) to the poll interval and beyond.
  static const prometheus::Histogram::BucketBoundaries execution{
      0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300};
  static const prometheus::Histogram::BucketBoundaries pickup{
      0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 60};
  auto outcome = [&](const char* outcome) -> prometheus::Counter& {
    return task_outcomes_.Add({{"type", name}, {"outcome", outcome}});
  };
  return types_
      .emplace(name, type_metrics{outcome("succeeded"), outcome("retry"), outcome("fail"),
                                  execution_seconds_.Add({{"type", name}}, execution),
                                  pickup_seconds_.Add({{"type", name}}, pickup)})
      .first->second;
}

node_metrics::~node_metrics() = default;

std::string node_metrics::render() const {
  return prometheus::TextSerializer{}.Serialize(registry->Collect());
}

std::string render_job_metrics(const pb::JobMetrics& jobs) {
  prometheus::Registry r;
  auto& firings = prometheus::BuildCounter()
                      .Name("taskmill_job_firings_total")
                      .Help("Firings of each job by outcome, from the ledger")
                      .Register(r);
  auto& last = prometheus::BuildGauge()
                   .Name("taskmill_job_last_fired_seconds")
                   .Help("When each job last fired, seconds since the epoch")
                   .Register(r);
  auto& next = prometheus::BuildGauge()
                   .Name("taskmill_job_next_fire_seconds")
                   .Help("When each job fires next, seconds since the epoch")
                   .Register(r);
  std::vector<const pb::JobMetric*> by_name;
  for (const auto& job : jobs.jobs()) by_name.push_back(&job);
  std::sort(by_name.begin(), by_name.end(),
            [](const auto* a, const auto* b) { return a->job() < b->job(); });
  for (size_t i = 0; i < by_name.size(); ++i) {
    const auto& job = *by_name[i];
    if (i >= metric_names_limit) {
      for (const auto& [outcome, n] : job.firings())
        firings.Add({{"job", other_names_label}, {"outcome", outcome}})
            .Increment(static_cast<double>(n));
      continue;
    }
    for (const auto& [outcome, n] : job.firings())
      firings.Add({{"job", job.job()}, {"outcome", outcome}}).Increment(static_cast<double>(n));
    if (job.has_last_fired_us())
      last.Add({{"job", job.job()}}).Set(static_cast<double>(job.last_fired_us()) / 1e6);
    if (job.has_next_fire_us())
      next.Add({{"job", job.job()}}).Set(static_cast<double>(job.next_fire_us()) / 1e6);
  }
  return prometheus::TextSerializer{}.Serialize(r.Collect());
}

std::string render_alert_metrics(const pb::AlertMetrics& alerts) {
  prometheus::Registry r;
  auto& raised = prometheus::BuildCounter()
                     .Name("taskmill_alerts_total")
                     .Help("Alerts raised by kind, as stored (kept for watcher.purge_retention)")
                     .Register(r);
  auto& deliveries = prometheus::BuildGauge()
                         .Name("taskmill_alert_deliveries")
                         .Help("Webhook deliveries of the stored alerts by state")
                         .Register(r);
  for (const char* kind : {"dead_task", "failure_rate", "record_failure_rate", "firing_missed",
                           "firing_skipped", "pending_too_old"}) {
    auto it = alerts.alerts().find(kind);
    raised.Add({{"kind", kind}})
        .Increment(it == alerts.alerts().end() ? 0.0 : static_cast<double>(it->second));
  }
  for (const char* state : {"pending", "delivered", "failed"}) {
    auto it = alerts.deliveries().find(state);
    deliveries.Add({{"state", state}})
        .Set(it == alerts.deliveries().end() ? 0.0 : static_cast<double>(it->second));
  }
  return prometheus::TextSerializer{}.Serialize(r.Collect());
}

std::string render_live_metrics(const pb::Stats& live) {
  prometheus::Registry r;
  auto& tasks = prometheus::BuildGauge()
                    .Name("taskmill_tasks")
                    .Help("Pending, failed and running tasks by type, cluster-wide")
                    .Register(r);
  // The types with most live tasks keep their names.
  std::map<std::string, int64_t> per_type;
  for (const auto& c : live.counts()) per_type[c.type()] += c.count();
  std::vector<std::pair<int64_t, std::string>> ranked;
  for (const auto& [type, n] : per_type) ranked.emplace_back(-n, type);
  std::sort(ranked.begin(), ranked.end());
  std::set<std::string> named;
  for (size_t i = 0; i < ranked.size() && i < metric_names_limit; ++i)
    named.insert(ranked[i].second);
  std::map<std::pair<std::string, std::string>, double> counts;
  for (const auto& c : live.counts())
    counts[{named.count(c.type()) ? c.type() : std::string{other_names_label},
            status_name(c.status())}] += static_cast<double>(c.count());
  for (const auto& [labels, n] : counts)
    tasks.Add({{"type", labels.first}, {"status", labels.second}}).Set(n);
  auto& used = prometheus::BuildGauge()
                   .Name("taskmill_limit_used")
                   .Help("Running tasks counted against each running limit")
                   .Register(r);
  auto& limit = prometheus::BuildGauge()
                    .Name("taskmill_limit")
                    .Help("Each running limit (global, node:<name>, type:<name>)")
                    .Register(r);
  for (const auto& l : live.limiter()) {
    used.Add({{"scope", l.scope()}}).Set(static_cast<double>(l.used()));
    limit.Add({{"scope", l.scope()}}).Set(static_cast<double>(l.limit()));
  }
  auto& key_running = prometheus::BuildGauge()
                          .Name("taskmill_key_running")
                          .Help(
                              "Running tasks of the 10 keys running most in each key space; "
                              "key=\"(other)\": the rest of the space's keys together")
                          .Register(r);
  auto& key_limit = prometheus::BuildGauge()
                        .Name("taskmill_key_limit")
                        .Help("The running limit of each key in taskmill_key_running")
                        .Register(r);
  for (const auto& k : live.keys()) {
    auto key = k.limit() > 0 ? k.key() : std::string{"(other)"};
    key_running.Add({{"space", k.space()}, {"key", key}}).Set(static_cast<double>(k.running()));
    if (k.limit() > 0)
      key_limit.Add({{"space", k.space()}, {"key", key}}).Set(static_cast<double>(k.limit()));
  }
  return prometheus::TextSerializer{}.Serialize(r.Collect());
}

std::string render_link_metrics(const pb::PeerLinks& links) {
  prometheus::Registry r;
  auto& family = prometheus::BuildGauge()
                     .Name("taskmill_cluster_links")
                     .Help("This node's CAF links to other nodes and remote executors by state")
                     .Register(r);
  std::map<std::pair<std::string, std::string>, double> counts;
  for (const char* kind : {"node", "executor"})
    for (const char* state : {"up", "down"}) counts[{kind, state}] = 0;
  for (const auto& l : links.links()) counts[{l.kind(), l.state()}] += 1;
  for (const auto& [key, n] : counts)
    family.Add({{"kind", key.first}, {"state", key.second}}).Set(n);
  return prometheus::TextSerializer{}.Serialize(r.Collect());
}

}  // namespace taskmill
