#include "actors/dispatcher/dispatcher_state.hpp"

#include "actors/executors/outcome.hpp"
#include "actors/metrics/node_metrics.hpp"
#include "messages/errors.hpp"

#include <prometheus/counter.h>
#include <prometheus/histogram.h>

#include <spdlog/spdlog.h>

namespace taskmill::dispatching {

namespace {

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

void release(self_ptr self, const pb::TaskOutcomes& outcomes) {
  pb::PermitRelease release;
  for (const auto& o : outcomes.outcomes()) release.add_types(o.type());
  self->send(self->state.options.limiter, release_atom_v, std::move(release));
}

/// Sends a batch on its way; kept once for both answers (a copy per handler
/// cost the node three deep copies of every batch).
void report(self_ptr self, outcome_batches::batch outcomes) {
  auto& st = self->state;
  self->request(st.options.storage, local_request_timeout, complete_atom_v, *outcomes)
      .then(
          [self, outcomes](const pb::OutcomeAcks& acks) {
            auto& st = self->state;
            st.outcomes.answered(outcomes);
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
            if (!st.storage_failing) {
              spdlog::warn("dispatcher: cannot store {} outcomes, trying again: {}",
                           outcomes->outcomes_size(), error_message(err));
              st.storage_failing = true;
            }
            st.outcomes.failed(outcomes);
            self->delayed_send(self, retry_delay, report_atom_v);
          });
}

}  // namespace

void record(self_ptr self, pb::TaskOutcome outcome) {
  count_outcome(*self->state.options.metrics, outcome);
  self->state.outcomes.record(std::move(outcome));
  schedule_flush(self);
}

void record_at_once(self_ptr self, pb::TaskOutcome outcome) {
  self->state.options.metrics->of_type(outcome.type()).execution_seconds.Observe(0);
  record(self, std::move(outcome));
}

void flush(self_ptr self) {
  self->state.flush_scheduled = false;
  if (auto batch = self->state.outcomes.take_recorded()) report(self, std::move(batch));
}

void send_again(self_ptr self) {
  if (auto batch = self->state.outcomes.take_failed()) report(self, std::move(batch));
}

int32_t left_to_drain(const dispatcher_state& st) {
  return static_cast<int32_t>(st.running.size()) + st.outcomes.not_stored();
}

void check_drained(self_ptr self) {
  auto& st = self->state;
  if (!st.drain || left_to_drain(st) > 0) return;
  st.drain->deliver(int32_t{0});
  st.drain.reset();
}

caf::result<pb::ResultAck> take_result(self_ptr self, int64_t id, const pb::ResultReport& report) {
  auto& st = self->state;
  auto outcome =
      outcome_of(id, report.attempt(), {}, report.outcome(), report.error(), report.result());
  auto it = st.running.find(id);
  std::optional<execution> ours;
  if (it != st.running.end() && it->second.attempt == report.attempt()) {
    outcome.set_type(it->second.type);
    log_end(outcome, it->second.type, it->second.trace_id);
    ours = std::move(it->second);
    st.running.erase(it);
  }
  auto batch = std::make_shared<pb::TaskOutcomes>();
  *batch->add_outcomes() = outcome;
  outcome_batches::batch one = batch;
  if (ours) st.outcomes.sending(one);
  auto promise = self->make_response_promise<pb::ResultAck>();
  self->request(st.options.storage, local_request_timeout, complete_atom_v, *one)
      .then(
          [self, promise, one, ours,
           attempt = report.attempt()](const pb::OutcomeAcks& acks) mutable {
            if (ours) {
              self->state.outcomes.answered(one);
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
            // Not stored: the execution is still ours to time out, at once
            // if its timeout came meanwhile (and found it gone).
            if (ours) {
              const auto& o = one->outcomes(0);
              self->state.running[o.task_id()] = *ours;
              self->state.outcomes.answered(one);
              if (self->clock().now() >= ours->times_out)
                self->send(self, caf::timeout_atom_v, o.task_id(), o.attempt());
            }
            promise.deliver(std::move(err));
          });
  return promise;
}

}  // namespace taskmill::dispatching
