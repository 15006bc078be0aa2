#include "actors/dispatcher/dispatcher_state.hpp"

#include "actors/executors/http_executor.hpp"
#include "actors/logging/log_format.hpp"
#include "actors/metrics/node_metrics.hpp"
#include "messages/errors.hpp"

#include <prometheus/counter.h>

#include <spdlog/spdlog.h>

#include <algorithm>

namespace taskmill::dispatching {

namespace {

constexpr size_t cancelled_before_kept = 1000;

/// Tells an HTTP executor to stop an attempt (a DELETE); once it answers
/// that it heard, storage marks the cancel told.
void tell_http_executor(self_ptr self, const pb::CancelNotice& cancel, const task_type_config& type,
                        std::string trace_id) {
  self->state.options.http->send(
      cancel_call_for(cancel, type.cancel_url.empty() ? type.url : type.cancel_url),
      [storage = self->state.options.storage, cancel,
       trace_id = std::move(trace_id)](const http_answer& answer) {
        if (cancel_heard(answer)) {
          pb::CancelNotices heard;
          *heard.add_cancels() = cancel;
          caf::anon_send(storage, cancels_told_atom_v, std::move(heard));
          return;
        }
        log_scope about{
            log_fields::of_attempt(cancel.task_id(), cancel.attempt(), cancel.type(), trace_id)};
        spdlog::warn(
            "dispatcher: the cancel of task {} attempt {} went unheard ({}); it is "
            "sent again later",
            cancel.task_id(), cancel.attempt(),
            answer.status == 0 ? answer.error : "HTTP " + std::to_string(answer.status));
      });
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
  auto it = st.running.find(cancel.task_id());
  bool runs_here = it != st.running.end() && it->second.attempt == cancel.attempt();
  if (!told) tell_http_executor(self, cancel, type, runs_here ? it->second.trace_id : "");
  if (!runs_here) {
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

}  // namespace

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

// One request at a time; a notice meanwhile takes them again after it.
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

}  // namespace taskmill::dispatching
