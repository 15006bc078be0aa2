#include "actors/dispatcher.hpp"

#include "actors/logging/log_format.hpp"

#include "actors/executors/builtin.hpp"
#include "actors/executors/caf_executors.hpp"
#include "actors/executors/http_executor.hpp"
#include "actors/executors/outcome.hpp"
#include "actors/metrics/node_metrics.hpp"
#include "messages/errors.hpp"
#include "messages/time.hpp"
#include "messages/validate.hpp"

#include <caf/actor_system.hpp>
#include <caf/typed_event_based_actor.hpp>

#include <prometheus/counter.h>
#include <prometheus/histogram.h>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <deque>
#include <optional>
#include <random>
#include <unordered_map>
#include <utility>

namespace taskmill {

namespace {

/// An execution that finishes later: on an HTTP or CAF executor, or asleep.
struct execution {
  int32_t attempt;
  std::string type;
  caf::actor_clock::time_point started;
  caf::actor_addr executor;  // the CAF executor running it, if any
  bool accepted = false;     // an HTTP executor answered 202
  // Its type lets it move its deadline: at its timeout, the database says
  // whether it did.
  bool may_move_deadline = false;
};

}  // namespace

struct dispatcher_state {
  static inline const char* name = "dispatcher";

  dispatcher_options options;
  std::unordered_map<int64_t, execution> running;
  caf_executor_pool executors;
  pb::TaskOutcomes unreported;
  // Batches of outcomes sent to storage and not yet stored, and those it
  // failed to take, to be sent again in this order.
  std::vector<std::shared_ptr<const pb::TaskOutcomes>> reporting;
  std::deque<std::shared_ptr<const pb::TaskOutcomes>> to_report_again;
  bool flush_scheduled = false;
  bool storage_failing = false;
  /// Woken when a retry is stored: the pusher, and the peers.
  std::vector<wake_listener_actor> retry_listeners;
  // Answered once nothing runs here any more (graceful stop).
  std::optional<caf::typed_response_promise<int32_t>> drain;
  // Asked to drain: the node hands back what runs here, so nothing more is
  // adopted.
  bool stopping = false;
  // Cancels being taken from storage, and whether another notice came
  // meanwhile.
  bool taking_cancels = false;
  bool cancels_again = false;
  // Attempts of this node cancelled before they ran here (a hand-off's
  // notification can trail its cancel): not run should they come. Newest
  // last, bounded.
  std::deque<std::pair<int64_t, int32_t>> cancelled_before;
  std::mt19937_64 rng{std::random_device{}()};
};

namespace {

using self_ptr = dispatcher_actor::stateful_pointer<dispatcher_state>;

constexpr auto report_retry_delay = std::chrono::milliseconds{500};
constexpr size_t cancelled_before_kept = 1000;

/// Counts an outcome in all and, where its type is known, for its type.
void count_outcome(node_metrics& m, const pb::TaskOutcome& outcome) {
  auto* of_type = outcome.type().empty() ? nullptr : &m.of_type(outcome.type());
  switch (outcome.outcome()) {
    case pb::OUTCOME_SUCCEEDED:
      m.outcome_succeeded.Increment();
      if (of_type) of_type->succeeded.Increment();
      break;
    case pb::OUTCOME_RETRY:
      m.outcome_retry.Increment();
      if (of_type) of_type->retry.Increment();
      break;
    default:
      m.outcome_fail.Increment();
      if (of_type) of_type->fail.Increment();
      break;
  }
}

void schedule_flush(self_ptr self) {
  if (self->state.flush_scheduled) return;
  self->state.flush_scheduled = true;
  self->send(self, caf::flush_atom_v);
}

void record(self_ptr self, pb::TaskOutcome outcome) {
  *self->state.unreported.add_outcomes() = std::move(outcome);
  schedule_flush(self);
}

bool holds(const pb::TaskOutcomes& outcomes, int64_t task_id) {
  return std::any_of(outcomes.outcomes().begin(), outcomes.outcomes().end(),
                     [task_id](const pb::TaskOutcome& o) { return o.task_id() == task_id; });
}

/// Whether a task runs here or its outcome is on its way to the database.
/// Asked for tasks handed off and after a claim's answer was lost; the
/// outcomes on their way are few batches (one a round trip), searched rather
/// than indexed on the hot path of claimed tasks.
bool knows(const dispatcher_state& st, int64_t task_id) {
  auto held = [task_id](const auto& batch) { return holds(*batch, task_id); };
  return st.running.count(task_id) > 0 || holds(st.unreported, task_id) ||
         std::any_of(st.reporting.begin(), st.reporting.end(), held) ||
         std::any_of(st.to_report_again.begin(), st.to_report_again.end(), held);
}

void reported(dispatcher_state& st, const std::shared_ptr<const pb::TaskOutcomes>& batch) {
  st.reporting.erase(std::find(st.reporting.begin(), st.reporting.end(), batch));
}

/// Executions ended here whose outcome is not stored yet.
int32_t outcomes_not_stored(const dispatcher_state& st) {
  auto count = st.unreported.outcomes_size();
  for (const auto& batch : st.reporting) count += batch->outcomes_size();
  for (const auto& batch : st.to_report_again) count += batch->outcomes_size();
  return count;
}

void check_drained(self_ptr self) {
  auto& st = self->state;
  if (!st.drain || !st.running.empty() || outcomes_not_stored(st) > 0) return;
  st.drain->deliver(int32_t{0});
  st.drain.reset();
}

void release(self_ptr self, const pb::TaskOutcomes& outcomes) {
  pb::PermitRelease release;
  for (const auto& o : outcomes.outcomes()) release.add_types(o.type());
  self->send(self->state.options.limiter, release_atom_v, std::move(release));
}

/// Kept once for both answers: a copy per handler cost the node three deep
/// copies of every batch.
void report(self_ptr self, std::shared_ptr<const pb::TaskOutcomes> outcomes) {
  auto& st = self->state;
  st.reporting.push_back(outcomes);
  self->request(st.options.storage, local_request_timeout, complete_atom_v, *outcomes)
      .then(
          [self, outcomes](const pb::OutcomeAcks& acks) {
            auto& st = self->state;
            reported(st, outcomes);
            if (st.storage_failing) {
              spdlog::info("dispatcher: outcomes are being stored again");
              st.storage_failing = false;
            }
            bool retries = false;
            for (const auto& ack : acks.acks()) {
              if (!ack.applied()) st.options.metrics->outcome_stale.Increment();
              retries |= ack.applied() && ack.status() == pb::FAILED;
            }
            if (retries)
              for (const auto& target : st.retry_listeners) self->send(target, wake_atom_v);
            // Stored (or stale, which changes nothing): the permits go back.
            release(self, *outcomes);
            check_drained(self);
          },
          [self, outcomes](const caf::error& err) {
            auto& st = self->state;
            reported(st, outcomes);
            if (!st.storage_failing) {
              spdlog::warn("dispatcher: cannot store {} outcomes, trying again: {}",
                           outcomes->outcomes_size(), error_message(err));
              st.storage_failing = true;
            }
            st.to_report_again.push_back(outcomes);
            self->delayed_send(self, report_retry_delay, report_atom_v);
          });
}

/// Forgets an execution (and frees its place on a CAF executor).
void forget(self_ptr self, std::unordered_map<int64_t, execution>::iterator it) {
  auto& st = self->state;
  auto elapsed = self->clock().now() - it->second.started;
  st.options.metrics->of_type(it->second.type)
      .execution_seconds.Observe(std::chrono::duration<double>(elapsed).count());
  if (it->second.executor) st.executors.release(it->second.executor);
  st.running.erase(it);
}

/// An asynchronous execution of `task` ended with `outcome`, if it was still
/// waited for.
void finish(self_ptr self, pb::TaskOutcome outcome) {
  auto& st = self->state;
  auto it = st.running.find(outcome.task_id());
  if (it == st.running.end() || it->second.attempt != outcome.attempt()) return;
  forget(self, it);
  count_outcome(*st.options.metrics, outcome);
  record(self, std::move(outcome));
}

/// The longest the attempt may run, should it move its deadline.
std::chrono::milliseconds longest(self_ptr self, const pb::Task& task) {
  return self->state.options.cfg->type_config(task.type())
      .longest_attempt(std::chrono::milliseconds{task.timeout_ms()});
}

void start_async(self_ptr self, const pb::Task& task, caf::actor_addr executor = {}) {
  std::chrono::milliseconds timeout{task.timeout_ms()};
  self->state.running[task.id()] =
      execution{task.attempt(),      task.type(), self->clock().now(),
                std::move(executor), false,       longest(self, task) > timeout};
  self->delayed_send(self, timeout, caf::timeout_atom_v, task.id(), task.attempt());
}

void time_out(self_ptr self, int64_t id, int32_t attempt) {
  auto it = self->state.running.find(id);
  if (it == self->state.running.end() || it->second.attempt != attempt) return;
  finish(self, outcome_of(id, attempt, it->second.type, pb::OUTCOME_RETRY,
                          it->second.accepted ? "timed out waiting for the result" : "timed out"));
}

/// At its timeout, an execution that may have moved its deadline runs on
/// until that deadline.
void check_deadline(self_ptr self, int64_t id, int32_t attempt) {
  self->request(self->state.options.storage, local_request_timeout, deadline_atom_v, id, attempt)
      .then(
          [self, id, attempt](int64_t left_ms) {
            if (left_ms > 0)
              self->delayed_send(self, std::chrono::milliseconds{left_ms}, caf::timeout_atom_v, id,
                                 attempt);
            else
              time_out(self, id, attempt);
          },
          [self, id, attempt](const caf::error&) { time_out(self, id, attempt); });
}

// -- executors ------------------------------------------------------------------

void record_at_once(self_ptr self, pb::TaskOutcome outcome) {
  auto& m = *self->state.options.metrics;
  m.of_type(outcome.type()).execution_seconds.Observe(0);
  count_outcome(m, outcome);
  record(self, std::move(outcome));
}

void run_sleep(self_ptr self, const pb::Task& task) {
  start_async(self, task);
  self->delayed_send(self, sleep_time(task), finished_atom_v,
                     outcome_of(task, pb::OUTCOME_SUCCEEDED));
}

void run_http(self_ptr self, const pb::Task& task, const std::string& url) {
  auto& st = self->state;
  start_async(self, task);
  auto call = http_call_for(task, url, st.rng);
  call.timeout = longest(self, task);
  st.options.http->send(std::move(call),
                        [dispatcher = caf::actor_cast<dispatcher_actor>(self),
                         progress = st.options.progress, task](http_answer answer) {
                          auto outcome = outcome_of_answer(task, answer);
                          if (!outcome) {
                            caf::anon_send(dispatcher, accepted_atom_v, task.id(), task.attempt());
                            return;
                          }
                          // The log first: it is taken while the attempt is its task's latest.
                          if (auto log = log_of_failed_answer(*outcome, answer))
                            caf::anon_send(progress, log_atom_v, task.id(), std::move(*log));
                          caf::anon_send(dispatcher, finished_atom_v, std::move(*outcome));
                        });
}

// -- CAF executors ----------------------------------------------------------------

void update_capacity(self_ptr self, const std::string& type) {
  self->send(self->state.options.limiter, capacity_atom_v, type,
             self->state.executors.capacity(type));
}

void run_caf(self_ptr self, const pb::Task& task) {
  auto executor = self->state.executors.take(task.type());
  if (!executor) {
    record_at_once(self, outcome_of(task, pb::OUTCOME_RETRY,
                                    "no executor registered for type " + task.type()));
    return;
  }
  start_async(self, task, executor.address());
  self->request(executor, longest(self, task), execute_atom_v, task)
      .then([self, task](
                pb::TaskOutcome& reply) { finish(self, outcome_of_reply(task, std::move(reply))); },
            [self, task](const caf::error& err) { finish(self, outcome_of_failure(task, err)); });
}

void forget_executor(self_ptr self, const caf::actor_addr& gone) {
  auto& st = self->state;
  for (const auto& type : st.executors.remove(gone)) update_capacity(self, type);
  std::vector<pb::TaskOutcome> lost;
  for (const auto& [id, exec] : st.running)
    if (exec.executor == gone)
      lost.push_back(
          outcome_of(id, exec.attempt, exec.type, pb::OUTCOME_RETRY, executor_went_away));
  for (auto& o : lost) finish(self, std::move(o));
}

// -- cancels ---------------------------------------------------------------------

bool cancelled_before(const dispatcher_state& st, int64_t id, int32_t attempt) {
  return !st.cancelled_before.empty() &&
         std::find(st.cancelled_before.begin(), st.cancelled_before.end(),
                   std::pair{id, attempt}) != st.cancelled_before.end();
}

void give_back_permit(self_ptr self, const std::string& type) {
  pb::PermitRelease release;
  release.add_types(type);
  self->send(self->state.options.limiter, release_atom_v, std::move(release));
}

/// Stops the execution a cancel names, telling its executor: a CAF or remote
/// executor gets (cancel, task id, attempt), an HTTP one a DELETE, a sleep
/// just ends; its permit goes back. An HTTP executor is told even of an
/// attempt not running here (this node restarted, or the node that ran it
/// is gone); one of this node's own attempts is kept from running should its
/// hand-off come later. Answers whether the cancel is delivered: an HTTP
/// executor's answer comes later, and marks it so then.
bool stop(self_ptr self, const pb::CancelNotice& cancel) {
  auto& st = self->state;
  const auto& type = st.options.cfg->type_config(cancel.type());
  bool told = type.executor != executor_kind::http;
  if (!told)
    st.options.http->send(
        cancel_call_for(cancel, type.cancel_url.empty() ? type.url : type.cancel_url),
        [storage = st.options.storage, cancel](const http_answer& answer) {
          if (cancel_heard(answer)) {
            pb::CancelNotices heard;
            *heard.add_cancels() = cancel;
            caf::anon_send(storage, cancels_told_atom_v, std::move(heard));
            return;
          }
          log_scope about{
              log_fields::of_attempt(cancel.task_id(), cancel.attempt(), cancel.type())};
          spdlog::warn(
              "dispatcher: the cancel of task {} attempt {} went unheard ({}); it is "
              "sent again later",
              cancel.task_id(), cancel.attempt(),
              answer.status == 0 ? answer.error : "HTTP " + std::to_string(answer.status));
        });
  auto it = st.running.find(cancel.task_id());
  if (it == st.running.end() || it->second.attempt != cancel.attempt()) {
    if (cancel.node() != st.options.node ||
        cancelled_before(st, cancel.task_id(), cancel.attempt()))
      return told;
    st.cancelled_before.emplace_back(cancel.task_id(), cancel.attempt());
    if (st.cancelled_before.size() > cancelled_before_kept) st.cancelled_before.pop_front();
    return told;
  }
  if (it->second.executor)
    caf::anon_send(caf::actor_cast<executor_actor>(it->second.executor), cancel_atom_v,
                   cancel.task_id(), cancel.attempt());
  give_back_permit(self, it->second.type);
  st.options.metrics->executions_cancelled.Increment();
  forget(self, it);
  check_drained(self);
  return told;
}

/// Takes this node's cancels from storage (one request at a time; a notice
/// meanwhile takes them again after it) and stops their executions.
void take_cancels(self_ptr self) {
  auto& st = self->state;
  if (st.taking_cancels) {
    st.cancels_again = true;
    return;
  }
  st.taking_cancels = true;
  pb::TakeCancels request;
  request.set_node(st.options.node);
  for (const auto& [name, type] : st.options.cfg->types)
    if (type.executor == executor_kind::http) request.add_reachable_types(name);
  request.set_lease_ms(st.options.cfg->lease().count());
  self->request(st.options.storage, local_request_timeout, take_cancels_atom_v, request)
      .then(
          [self](const pb::CancelNotices& notices) {
            auto& st = self->state;
            st.taking_cancels = false;
            pb::CancelNotices told;
            for (const auto& cancel : notices.cancels())
              if (stop(self, cancel)) *told.add_cancels() = cancel;
            // Storage's answer is not awaited: a cancel not marked told is
            // taken again after the lease.
            if (told.cancels_size() > 0)
              caf::anon_send(st.options.storage, cancels_told_atom_v, std::move(told));
            if (std::exchange(st.cancels_again, false)) take_cancels(self);
          },
          [self](const caf::error& err) {
            // The reconciler's next tick takes them.
            self->state.taking_cancels = false;
            spdlog::debug("dispatcher: cannot take cancels: {}", error_message(err));
          });
}

// -- dispatch ---------------------------------------------------------------------

void execute(self_ptr self, const pb::Task& task) {
  if (cancelled_before(self->state, task.id(), task.attempt())) {
    give_back_permit(self, task.type());
    return;
  }
  const auto& type = self->state.options.cfg->type_config(task.type());
  if (task.has_started_at() && task.has_execute_at()) {
    auto waited_us =
        std::max<int64_t>(0, to_micros(task.started_at()) - to_micros(task.execute_at()));
    self->state.options.metrics->of_type(task.type())
        .pickup_seconds.Observe(static_cast<double>(waited_us) / 1e6);
  }
  switch (type.executor) {
    case executor_kind::noop:
    case executor_kind::fail:
      record_at_once(self, instant_outcome(type.executor, task));
      return;
    case executor_kind::sleep:
      run_sleep(self, task);
      return;
    case executor_kind::http:
      run_http(self, task, type.url);
      return;
    case executor_kind::caf:
    case executor_kind::none:
      run_caf(self, task);
      return;
  }
}

/// Executions the database says are over no longer hold a permit here.
void reconcile(self_ptr self) {
  auto& st = self->state;
  if (st.running.empty()) return;
  pb::Executions mine;
  for (const auto& [id, exec] : st.running) {
    mine.add_task_ids(id);
    mine.add_attempts(exec.attempt);
  }
  self->request(st.options.storage, local_request_timeout, check_atom_v, mine)
      .then(
          [self](const pb::Executions& over) {
            auto& st = self->state;
            pb::PermitRelease release;
            for (int i = 0; i < over.task_ids_size(); ++i) {
              auto it = st.running.find(over.task_ids(i));
              if (it == st.running.end() || it->second.attempt != over.attempts(i)) continue;
              release.add_types(it->second.type);
              forget(self, it);
            }
            if (release.types_size() == 0) return;
            spdlog::info(
                "dispatcher: {} executions were over by the database; their permits are back",
                release.types_size());
            self->send(st.options.limiter, release_atom_v, std::move(release));
            check_drained(self);
          },
          [](const caf::error& err) {
            spdlog::debug("dispatcher: cannot reconcile: {}", error_message(err));
          });
}

/// The task the hand-off notification of `running`'s i-th task carried, if
/// it did and the pusher let it run so.
const pb::Task* carried(const pb::Executions& running, int i) {
  if (i >= running.tasks_size() || running.tasks(i).id() != running.task_ids(i)) return nullptr;
  return &running.tasks(i);
}

/// Executions the database has running here, read after a claim whose answer
/// was lost, or handed to this node by submits. Those this dispatcher knows
/// are left. Hand-offs whose notification carried the task run at once. The
/// rest run here, read whole from the outcomes' storage if they still run
/// under their attempt, with what is left of their timeout: it stores this
/// dispatcher's outcomes in the order they were sent, so an outcome stored
/// since the read shows there. Each takes a permit: of those the pusher held
/// for its offer (permits_held, which go back whatever runs), or one of its
/// own. A stopping node runs none: it hands back what runs here.
void adopt(self_ptr self, const pb::Executions& running) {
  auto& st = self->state;
  pb::Executions unknown;
  unknown.set_permits_held(running.permits_held());
  unknown.set_handed_off(running.handed_off());
  std::vector<const pb::Task*> at_once;
  for (int i = 0; i < running.task_ids_size() && !st.stopping; ++i) {
    if (knows(st, running.task_ids(i))) continue;
    if (const auto* task = carried(running, i)) {
      at_once.push_back(task);
      continue;
    }
    unknown.add_task_ids(running.task_ids(i));
    unknown.add_attempts(running.attempts(i));
  }
  if (!at_once.empty()) {
    pb::PermitUse taken;
    auto theirs = std::min<int32_t>(unknown.permits_held(), static_cast<int32_t>(at_once.size()));
    taken.set_permits(theirs);
    unknown.set_permits_held(unknown.permits_held() - theirs);
    for (const auto* task : at_once) taken.add_claimed_types(task->type());
    self->send(st.options.limiter, settle_atom_v, std::move(taken));
    for (const auto* task : at_once) execute(self, *task);
  }
  if (unknown.task_ids_size() == 0) {
    if (unknown.permits_held() == 0) return;
    pb::PermitUse back;
    back.set_permits(unknown.permits_held());
    self->send(st.options.limiter, settle_atom_v, std::move(back));
    return;
  }
  self->request(st.options.storage, local_request_timeout, running_atom_v, unknown)
      .then(
          [self, unknown](const pb::TaskList& still_running) {
            auto& st = self->state;
            pb::PermitUse taken;
            taken.set_permits(unknown.permits_held());
            std::vector<const pb::Task*> adopted;
            for (const auto& task : still_running.tasks()) {
              if (st.stopping || knows(st, task.id())) continue;
              taken.add_claimed_types(task.type());
              adopted.push_back(&task);
            }
            if (taken.permits() > 0 || !adopted.empty())
              self->send(st.options.limiter, settle_atom_v, std::move(taken));
            if (!adopted.empty() && !unknown.handed_off())
              spdlog::warn(
                  "dispatcher: {} tasks running here unknown to it (a claim's answer or "
                  "hand-offs' notifications lost) run now",
                  adopted.size());
            for (const auto* task : adopted) execute(self, *task);
          },
          [self, unknown](const caf::error& err) {
            spdlog::warn(
                "dispatcher: cannot read tasks that run here unknown to it, trying again: {}",
                error_message(err));
            self->delayed_send(self, report_retry_delay, adopt_atom_v, unknown);
          });
}

/// A result sent to POST /v1/tasks/{id}/result: stored at once, fenced by its
/// attempt; answered once storage says whether it applied.
caf::result<pb::ResultAck> take_result(self_ptr self, int64_t id, const pb::ResultReport& report) {
  auto& st = self->state;
  auto outcome =
      outcome_of(id, report.attempt(), {}, report.outcome(), report.error(), report.result());
  auto it = st.running.find(id);
  bool ours = it != st.running.end() && it->second.attempt == report.attempt();
  if (ours) {
    outcome.set_type(it->second.type);
    st.running.erase(it);
  }
  auto batch = std::make_shared<pb::TaskOutcomes>();
  *batch->add_outcomes() = outcome;
  std::shared_ptr<const pb::TaskOutcomes> one = batch;
  if (ours) st.reporting.push_back(one);
  auto promise = self->make_response_promise<pb::ResultAck>();
  self->request(st.options.storage, local_request_timeout, complete_atom_v, *one)
      .then(
          [self, promise, one, ours,
           attempt = report.attempt()](const pb::OutcomeAcks& acks) mutable {
            if (ours) {
              reported(self->state, one);
              release(self, *one);
              check_drained(self);
            }
            if (acks.acks_size() == 1 && !acks.acks(0).applied() &&
                acks.acks(0).status() == pb::TASK_STATUS_UNSPECIFIED) {
              promise.deliver(
                  make_error(errc::not_found,
                             "no task with id " + std::to_string(one->outcomes(0).task_id())));
              return;
            }
            pb::ResultAck ack;
            ack.set_accepted(acks.acks_size() == 1 && acks.acks(0).applied());
            if (ack.accepted())
              count_outcome(*self->state.options.metrics, one->outcomes(0));
            else
              ack.set_reason("stale: the task is not running under attempt " +
                             std::to_string(attempt));
            promise.deliver(std::move(ack));
          },
          [self, promise, one, ours](caf::error& err) mutable {
            // Not stored: the execution is still ours to time out.
            if (ours) {
              const auto& o = one->outcomes(0);
              self->state.running[o.task_id()] =
                  execution{o.attempt(), o.type(), self->clock().now(), {}};
              reported(self->state, one);
            }
            promise.deliver(std::move(err));
          });
  return promise;
}

dispatcher_actor::behavior_type dispatcher(self_ptr self, dispatcher_options options) {
  self->state.options = std::move(options);
  self->set_down_handler([self](caf::down_msg& msg) { forget_executor(self, msg.source); });
  return {
      [](ping_atom) { return caf::ok_atom_v; },
      [self](caf::subscribe_atom, wake_listener_actor target) {
        self->state.retry_listeners.push_back(std::move(target));
      },
      [self](dispatch_atom, const pb::TaskList& list) {
        for (const auto& task : list.tasks()) execute(self, task);
      },
      [self](register_atom, executor_actor executor,
             const pb::ExecutorRegistration& registration) -> caf::result<int32_t> {
        if (auto err = self->state.executors.add(executor, registration)) return err;
        self->monitor(executor);
        for (const auto& type : registration.types()) update_capacity(self, type);
        spdlog::info("dispatcher: an executor runs {} at a time of {}", registration.capacity(),
                     fmt::join(registration.types(), ", "));
        return registration.types_size();
      },
      [self](progress_atom, int64_t id, pb::Progress& report) -> caf::result<pb::ResultAck> {
        if (auto err = validate(report)) return err;
        return self->delegate(self->state.options.progress, progress_atom_v, id, std::move(report));
      },
      [self](log_atom, int64_t id, pb::AttemptLog& log) -> caf::result<pb::ResultAck> {
        if (auto err = validate(log)) return err;
        return self->delegate(self->state.options.progress, log_atom_v, id, std::move(log));
      },
      [self](result_atom, int64_t id, const pb::ResultReport& report) {
        return take_result(self, id, report);
      },
      [self](accepted_atom, int64_t id, int32_t attempt) {
        auto it = self->state.running.find(id);
        if (it != self->state.running.end() && it->second.attempt == attempt)
          it->second.accepted = true;
      },
      [self](finished_atom, pb::TaskOutcome& outcome) { finish(self, std::move(outcome)); },
      [self](caf::timeout_atom, int64_t id, int32_t attempt) {
        auto it = self->state.running.find(id);
        if (it == self->state.running.end() || it->second.attempt != attempt) return;
        if (it->second.may_move_deadline)
          check_deadline(self, id, attempt);
        else
          time_out(self, id, attempt);
      },
      [self](caf::flush_atom) {
        auto& st = self->state;
        st.flush_scheduled = false;
        if (st.unreported.outcomes_size() == 0) return;
        auto batch = std::make_shared<pb::TaskOutcomes>();
        batch->Swap(&st.unreported);
        report(self, std::move(batch));
      },
      [self](report_atom) {
        auto& st = self->state;
        if (st.to_report_again.empty()) return;
        auto batch = std::move(st.to_report_again.front());
        st.to_report_again.pop_front();
        report(self, std::move(batch));
      },
      [self](reconcile_atom) {
        // Cancels first: an execution reconcile finds over may be a cancel
        // whose notice went unheard, and its executor is to be told.
        take_cancels(self);
        reconcile(self);
      },
      [self](cancel_atom) { take_cancels(self); },
      [self](adopt_atom, const pb::Executions& running) { adopt(self, running); },
      [self](drain_atom, int64_t grace_ms) -> caf::result<int32_t> {
        auto& st = self->state;
        st.stopping = true;
        st.drain = self->make_response_promise<int32_t>();
        auto promise = *st.drain;
        self->delayed_send(self, std::chrono::milliseconds{grace_ms}, drain_atom_v);
        check_drained(self);
        return promise;
      },
      [self](drain_atom) {
        auto& st = self->state;
        if (!st.drain) return;
        st.drain->deliver(static_cast<int32_t>(st.running.size()) + outcomes_not_stored(st));
        st.drain.reset();
      },
  };
}

}  // namespace

dispatcher_actor spawn_dispatcher(caf::actor_system& sys, dispatcher_options options) {
  return sys.spawn(dispatcher, std::move(options));
}

}  // namespace taskmill
