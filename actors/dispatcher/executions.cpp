#include "actors/dispatcher/dispatcher_state.hpp"

#include "actors/executors/builtin.hpp"
#include "actors/executors/http_executor.hpp"
#include "actors/executors/outcome.hpp"
#include "actors/logging/log_format.hpp"
#include "actors/metrics/node_metrics.hpp"
#include "messages/errors.hpp"
#include "messages/time.hpp"

#include <prometheus/histogram.h>

#include <spdlog/spdlog.h>

#include <algorithm>

namespace taskmill::dispatching {

namespace {

/// The longest the attempt may run, should it move its deadline.
std::chrono::milliseconds longest(self_ptr self, const pb::Task& task) {
  return self->state.options.cfg->type_config(task.type())
      .longest_attempt(std::chrono::milliseconds{task.timeout_ms()});
}

void end_at_once(self_ptr self, const pb::Task& task, pb::TaskOutcome outcome) {
  log_end(outcome, task.type(), task.trace_id());
  record_at_once(self, std::move(outcome));
}

void start_async(self_ptr self, const pb::Task& task, caf::actor_addr executor = {}) {
  auto& running = self->state.running;
  // An attempt the database took back (its heartbeat went silent) and gave
  // this node again: the older one's end is stale and stores nothing, so
  // its permit and its executor's place go back now, or never would.
  if (auto older = running.find(task.id()); older != running.end()) {
    give_back_permit(self, older->second.type);
    forget(self, older);
  }
  std::chrono::milliseconds timeout{task.timeout_ms()};
  auto now = self->clock().now();
  running[task.id()] = execution{task.attempt(),
                                 task.type(),
                                 now,
                                 now + timeout,
                                 std::move(executor),
                                 false,
                                 longest(self, task) > timeout,
                                 task.trace_id()};
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

void update_capacity(self_ptr self, const std::string& type) {
  self->send(self->state.options.limiter, capacity_atom_v, type,
             self->state.executors.capacity(type));
}

void run_caf(self_ptr self, const pb::Task& task) {
  auto executor = self->state.executors.take(task.type());
  if (!executor) {
    end_at_once(
        self, task,
        outcome_of(task, pb::OUTCOME_RETRY, "no executor registered for type " + task.type()));
    return;
  }
  start_async(self, task, executor.address());
  self->request(executor, longest(self, task), execute_atom_v, task)
      .then([self, task](
                pb::TaskOutcome& reply) { finish(self, outcome_of_reply(task, std::move(reply))); },
            [self, task](const caf::error& err) { finish(self, outcome_of_failure(task, err)); });
}

}  // namespace

void log_end(const pb::TaskOutcome& outcome, std::string_view type, std::string_view trace_id) {
  if (outcome.outcome() == pb::OUTCOME_SUCCEEDED || !spdlog::should_log(spdlog::level::debug))
    return;
  log_scope about{log_fields::of_attempt(outcome.task_id(), outcome.attempt(), type, trace_id)};
  spdlog::debug("dispatcher: task {} attempt {} (trace {}) {}: {}", outcome.task_id(),
                outcome.attempt(), trace_id,
                outcome.outcome() == pb::OUTCOME_RETRY ? "is to be retried" : "failed",
                outcome.error());
}

void execute(self_ptr self, const pb::Task& task) {
  if (cancelled_before(self->state, task.id(), task.attempt())) {
    self->state.options.metrics->executions_cancelled.Increment();
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
      end_at_once(self, task, instant_outcome(type.executor, task));
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

void forget(self_ptr self, std::unordered_map<int64_t, execution>::iterator it) {
  auto& st = self->state;
  auto elapsed = self->clock().now() - it->second.started;
  st.options.metrics->of_type(it->second.type)
      .execution_seconds.Observe(std::chrono::duration<double>(elapsed).count());
  if (it->second.executor) st.executors.release(it->second.executor);
  st.running.erase(it);
}

void finish(self_ptr self, pb::TaskOutcome outcome) {
  auto& st = self->state;
  auto it = st.running.find(outcome.task_id());
  if (it == st.running.end() || it->second.attempt != outcome.attempt()) return;
  log_end(outcome, it->second.type, it->second.trace_id);
  forget(self, it);
  record(self, std::move(outcome));
}

void timeout_reached(self_ptr self, int64_t id, int32_t attempt) {
  auto it = self->state.running.find(id);
  if (it == self->state.running.end() || it->second.attempt != attempt) return;
  if (it->second.may_move_deadline)
    check_deadline(self, id, attempt);
  else
    time_out(self, id, attempt);
}

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

caf::result<int32_t> add_executor(self_ptr self, executor_actor executor,
                                  const pb::ExecutorRegistration& registration) {
  if (auto err = self->state.executors.add(executor, registration)) return err;
  self->monitor(executor);
  for (const auto& type : registration.types()) update_capacity(self, type);
  spdlog::info("dispatcher: an executor runs {} at a time of {}", registration.capacity(),
               fmt::join(registration.types(), ", "));
  return registration.types_size();
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

}  // namespace taskmill::dispatching
