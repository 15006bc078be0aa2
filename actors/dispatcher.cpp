#include "actors/dispatcher.hpp"

#include "actors/dispatcher/dispatcher_state.hpp"
#include "messages/validate.hpp"

#include <caf/actor_system.hpp>

namespace taskmill {

namespace {

using namespace dispatching;

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
      [self](register_atom, executor_actor executor, const pb::ExecutorRegistration& registration) {
        return add_executor(self, std::move(executor), registration);
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
        timeout_reached(self, id, attempt);
      },
      [self](caf::flush_atom) { flush(self); },
      [self](report_atom) { send_again(self); },
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
        st.drain->deliver(left_to_drain(st));
        st.drain.reset();
      },
  };
}

}  // namespace

dispatcher_actor spawn_dispatcher(caf::actor_system& sys, dispatcher_options options) {
  return sys.spawn(dispatcher, std::move(options));
}

}  // namespace taskmill
