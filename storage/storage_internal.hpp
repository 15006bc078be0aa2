#pragma once

// The storage actor's insides, shared by its files: its state, the requests
// a round trip drains, and how a request asks for statements. storage.cpp
// runs the pipeline (connection, queue, flush, reconnect) and holds the one
// routing table; each *_requests.cpp answers the requests of one area, as
// the *_rows.cpp beside it read their rows.

#include "storage/finished_estimate.hpp"
#include "storage/listener.hpp"
#include "storage/pg.hpp"
#include "storage/statements.hpp"
#include "storage/storage.hpp"

#include <caf/typed_event_based_actor.hpp>

#include <algorithm>
#include <chrono>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace taskmill {

namespace storage_internal {

using results = std::vector<caf::expected<db::result>>;

// Deadlocks, serialization failures and a full lock table are tried this
// often in all, each try after a longer wait (retry_delay): what another
// transaction holds is more often gone by then than at once.
constexpr int max_tries = 4;

/// The wait before a request's try after its `failed` first ones: 50, 200,
/// 800 ms, each from 3/4 to 5/4 of that by `unit_random` (in [0, 1)), so
/// that requests that failed together do not meet again.
std::chrono::milliseconds retry_delay(int failed, double unit_random);

// Rows per submit statement; a larger batch is split. Each row holds an
// advisory lock until commit, and the lock table is shared and bounded.
constexpr size_t max_submit_rows = 1000;

struct submit_request {
  pb::SubmitTasks tasks;
  caf::typed_response_promise<pb::SubmitResults> promise;
  int tries = 0;
  // 0: merged with any other request. After a merged statement failed, its
  // requests are tried again in two halves, each a group of its own, until the
  // bad one is alone.
  int group = 0;
};

struct complete_request {
  pb::TaskOutcomes outcomes;
  caf::typed_response_promise<pb::OutcomeAcks> promise;
  int tries = 0;
};

/// Any other request: statements of its own, and what to do with their results.
struct plain_request {
  std::vector<db::call> calls;
  std::function<void(results&&)> answer;
  int tries = 0;
};

/// Statements sent in one round trip, and who gets which results.
struct part {
  std::vector<db::call> calls;
  std::function<void(results&&)> on_results;
};

}  // namespace storage_internal

struct storage_state {
  static inline const char* name = "storage";

  storage_options options;
  std::optional<db::connection> conn;
  std::vector<storage_internal::submit_request> submits;
  std::vector<storage_internal::complete_request> completes;
  std::vector<storage_internal::plain_request> plains;
  /// Requests waiting to be tried again: when, and what puts them back in
  /// their queue.
  std::vector<std::pair<std::chrono::steady_clock::time_point, std::function<void()>>> retries;
  std::minstd_rand retry_random{std::random_device{}()};
  bool flush_scheduled = false;
  bool reconnect_scheduled = false;
  int last_group = 0;
  std::chrono::milliseconds reconnect_delay{0};
  std::unique_ptr<db::notification_listener> listener;
  std::unique_ptr<db::notification_listener> job_listener;
  std::unique_ptr<db::notification_listener> cancel_listener;
  // Compensation rules as prepared statements; the strings back the views.
  std::vector<std::pair<std::string, std::string>> rule_text;
  std::vector<db::statement> rule_statements;
  db::finished_estimate finished_estimate;
};

namespace storage_internal {

using self_ptr = storage_actor::stateful_pointer<storage_state>;

/// The error of a request while PostgreSQL is away.
caf::error unavailable(self_ptr self);
bool retryable(const caf::error& err);
void schedule_flush(self_ptr self);
/// Runs `requeue`, which puts requests that failed `failed` times back in
/// their queue, after their wait (retry_delay), and flushes then.
void retry_later(self_ptr self, int failed, std::function<void()> requeue);

/// Puts `later` back in the queue `queue` of the state once the wait of the
/// request among them that failed most often is over.
template <class Request>
void retry_later(self_ptr self, std::vector<Request> later,
                 std::vector<Request> storage_state::*queue) {
  if (later.empty()) return;
  int failed = 0;
  for (const auto& r : later) failed = std::max(failed, r.tries);
  retry_later(self, failed, [self, queue, later = std::move(later)]() mutable {
    for (auto& r : later) (self->state.*queue).push_back(std::move(r));
  });
}

/// Sends `calls` in the next round trip and answers `promise` with what
/// `read` makes of their results. The first `must_succeed` calls (all, by
/// default) fail the request when they fail; `read` sees the others as they
/// came back.
template <class T>
void enqueue(self_ptr self, std::vector<db::call> calls, caf::typed_response_promise<T> promise,
             std::function<caf::expected<T>(results&)> read,
             size_t must_succeed = std::numeric_limits<size_t>::max()) {
  plain_request r;
  r.calls = std::move(calls);
  r.answer = [promise, read = std::move(read), must_succeed](results&& rs) mutable {
    for (size_t i = 0; i < rs.size() && i < must_succeed; ++i)
      if (!rs[i]) {
        promise.deliver(rs[i].error());
        return;
      }
    auto value = read(rs);
    if (value)
      promise.deliver(std::move(*value));
    else
      promise.deliver(value.error());
  };
  self->state.plains.push_back(std::move(r));
  schedule_flush(self);
}

/// Answers a request with what `read` makes of the results of `calls`, sent
/// in the next round trip; at once with an error while PostgreSQL is away.
template <class T>
caf::result<T> ask_db(self_ptr self, std::vector<db::call> calls,
                      std::function<caf::expected<T>(results&)> read,
                      size_t must_succeed = std::numeric_limits<size_t>::max()) {
  if (!self->state.conn) return unavailable(self);
  auto promise = self->make_response_promise<T>();
  enqueue<T>(self, std::move(calls), promise, std::move(read), must_succeed);
  return promise;
}

/// A call whose answer is the integer in its first row and column.
caf::result<int32_t> ask_count(self_ptr self, db::call c);

/// Arrays as PostgreSQL literals.
std::string int_array(const google::protobuf::RepeatedField<int32_t>& values);
std::string text_array(const google::protobuf::RepeatedPtrField<std::string>& values);

/// Starts `listener` on `channels`, calling `on_notify` from its thread.
void subscribe(self_ptr self, std::unique_ptr<db::notification_listener>& listener,
               std::vector<std::string> channels, db::notification_listener::callback on_notify);
/// Forwards NOTIFY on `channel` to `target`, through a listener of its own.
void subscribe(self_ptr self, std::unique_ptr<db::notification_listener>& listener,
               const char* channel, wake_listener_actor target);

// -- tasks (task_requests.cpp) ------------------------------------------------------
caf::result<pb::RescheduleResult> reschedule(self_ptr self, const pb::RescheduleRequest& req);
caf::result<pb::CancelResult> cancel(self_ptr self, const pb::CancelRequest& req);
caf::result<pb::ClaimedTasks> claim(self_ptr self, const pb::ClaimRequest& req);
caf::result<pb::NextDue> next_due(self_ptr self, const pb::ClaimRequest& req);
caf::result<pb::Executions> running_on_node(self_ptr self, const std::string& node);
caf::result<pb::TaskList> still_running(self_ptr self, const pb::Executions& executions);
caf::result<pb::Task> task_with_waiting(self_ptr self, int64_t id);
caf::result<pb::Task> task_by_id(self_ptr self, const db::statement& statement, int64_t id);
caf::result<pb::TaskList> list_tasks(self_ptr self, const pb::ListTasksRequest& req);
caf::result<pb::AttemptList> attempts(self_ptr self, int64_t id);
caf::result<pb::BatchCounts> batch_counts(self_ptr self, const std::string& batch);
caf::result<pb::Stats> live_counts(self_ptr self);
caf::result<pb::Stats> stats(self_ptr self);
caf::result<pb::Executions> finished_executions(self_ptr self, const pb::Executions& executions);
caf::result<pb::CancelNotices> take_cancels(self_ptr self, const pb::TakeCancels& request);
caf::result<int32_t> cancels_told(self_ptr self, const pb::CancelNotices& told);
caf::result<pb::ProgressAcks> report_progress(self_ptr self, const pb::ProgressReports& reports);
caf::result<int64_t> attempt_deadline(self_ptr self, int64_t id, int32_t attempt);
caf::result<pb::LogAcks> append_logs(self_ptr self, const pb::LogBatch& batch);
caf::result<pb::TaskLog> read_log(self_ptr self, const pb::TaskLogRequest& req);
caf::result<int32_t> put_type_settings(self_ptr self, const pb::TypeSettingsList& settings);
/// The types a grant lets this node claim; null: any.
db::param claimable_types(const pb::ClaimGrant& grant);

// -- hand-offs (hand_off_requests.cpp) ----------------------------------------------
caf::result<bool> make_offer(self_ptr self, const pb::ClaimRequest& req);
caf::result<bool> top_up_offer(self_ptr self, const std::string& node, int64_t generation,
                               int32_t permits);
caf::result<int32_t> take_back_offer(self_ptr self, const std::string& node, int32_t offered);
void subscribe_claims(self_ptr self, claim_waker_actor pusher, const std::string& node);

// -- nodes and the leader's duties (node_requests.cpp) ------------------------------
caf::result<pb::NodeList> nodes(self_ptr self, int64_t lease_ms);
caf::result<int32_t> register_node(self_ptr self, const pb::NodeRegistration& node);
caf::result<bool> heartbeat(self_ptr self, const pb::Heartbeat& beat);
caf::result<int64_t> lead(self_ptr self, const pb::Lead& req);
caf::result<pb::SweepResult> sweep(self_ptr self, const pb::SweepRequest& req);
caf::result<int32_t> compensate(self_ptr self, int32_t rule, int64_t term);

// -- workflows (workflow_requests.cpp) ----------------------------------------------
caf::result<pb::WorkflowSubmitted> submit_workflow(self_ptr self, const pb::SubmitWorkflow& wf,
                                                   int64_t lease_ms);
caf::result<pb::Workflow> get_workflow(self_ptr self, int64_t id);
caf::result<pb::WorkflowList> list_workflows(self_ptr self, int32_t limit, int64_t before);

// -- recurring jobs (job_requests.cpp) ----------------------------------------------
caf::result<pb::JobPutResult> put_job(self_ptr self, const pb::Job& job);
caf::result<std::string> put_job_problem(self_ptr self, const pb::Job& job);
caf::result<pb::Job> get_job(self_ptr self, const std::string& name);
caf::result<pb::JobList> list_jobs(self_ptr self);
caf::result<bool> delete_job(self_ptr self, const std::string& name);
caf::result<pb::Job> set_job_enabled(self_ptr self, const std::string& name, bool on,
                                     int64_t next_us);
caf::result<pb::JobFiring> trigger_job(self_ptr self, const std::string& name,
                                       const std::string& payload, int64_t lease_ms);
caf::result<pb::JobFirings> job_firings(self_ptr self, const std::string& name, int32_t limit);
caf::result<pb::JobMetrics> job_metrics(self_ptr self);
caf::result<pb::DueJobs> due_jobs(self_ptr self, int32_t limit);
caf::result<pb::FiringRound> fire_jobs(self_ptr self, const pb::JobPlans& plans);

// -- key spaces (key_requests.cpp) -------------------------------------------------
caf::result<pb::KeySpaceList> list_key_spaces(self_ptr self);
caf::result<pb::KeySpaceState> get_key_space(self_ptr self, const std::string& name, int32_t top);
caf::result<pb::KeySpacePutResult> put_key_space(self_ptr self, const pb::KeySpace& space);
caf::result<bool> delete_key_space(self_ptr self, const std::string& name);
caf::result<pb::KeyState> get_key(self_ptr self, const std::string& space, const std::string& key,
                                  int32_t tasks);

// -- alerts (alert_requests.cpp) ----------------------------------------------------
caf::result<pb::AlertRound> alert_round(self_ptr self, const pb::AlertCheck& check);
caf::result<pb::AlertList> list_alerts(self_ptr self, const pb::ListAlertsRequest& req);
caf::result<pb::AlertMetrics> alert_metrics(self_ptr self);

}  // namespace storage_internal

}  // namespace taskmill
