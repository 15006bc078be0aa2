#include "actors/dispatcher.hpp"

#include "messages/errors.hpp"

#include <caf/actor_system.hpp>
#include <caf/typed_event_based_actor.hpp>

#include <spdlog/spdlog.h>

#include <charconv>
#include <unordered_map>

namespace taskmill {

namespace {

/// An execution that finishes later (or times out).
struct execution {
  int32_t attempt;
  std::string type;
};

}  // namespace

struct dispatcher_state {
  static inline const char* name = "dispatcher";

  dispatcher_options options;
  std::unordered_map<int64_t, execution> running;
  pb::TaskOutcomes unreported;
  bool flush_scheduled = false;
  bool storage_failing = false;
};

namespace {

using self_ptr = dispatcher_actor::stateful_pointer<dispatcher_state>;

constexpr auto storage_timeout = std::chrono::seconds{120};
constexpr auto report_retry_delay = std::chrono::milliseconds{500};

pb::TaskOutcome outcome_of(const pb::Task& task, pb::ExecutionOutcome kind,
                           std::string error = {}) {
  pb::TaskOutcome out;
  out.set_task_id(task.id());
  out.set_attempt(task.attempt());
  out.set_type(task.type());
  out.set_outcome(kind);
  out.set_error(std::move(error));
  return out;
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

void report(self_ptr self, pb::TaskOutcomes outcomes) {
  auto& st = self->state;
  self->request(st.options.storage, storage_timeout, complete_atom_v, outcomes)
      .then(
          [self, outcomes](const pb::OutcomeAcks&) {
            auto& st = self->state;
            if (st.storage_failing) {
              spdlog::info("dispatcher: outcomes are being stored again");
              st.storage_failing = false;
            }
            // Stored (or stale, which changes nothing): the permits go back.
            pb::PermitRelease release;
            for (const auto& o : outcomes.outcomes()) release.add_types(o.type());
            self->send(st.options.limiter, release_atom_v, std::move(release));
          },
          [self, outcomes](const caf::error& err) mutable {
            auto& st = self->state;
            if (!st.storage_failing) {
              spdlog::warn("dispatcher: cannot store {} outcomes, trying again: {}",
                           outcomes.outcomes_size(), error_message(err));
              st.storage_failing = true;
            }
            self->delayed_send(self, report_retry_delay, report_atom_v, std::move(outcomes));
          });
}

/// Milliseconds to sleep: the payload is a number, or an object with "ms".
int64_t sleep_millis(const std::string& payload) {
  auto pos = payload.find_first_of("0123456789");
  auto key = payload.find("\"ms\"");
  if (key != std::string::npos) pos = payload.find_first_of("0123456789", key);
  if (pos == std::string::npos) return 0;
  int64_t ms = 0;
  std::from_chars(payload.data() + pos, payload.data() + payload.size(), ms);
  return ms;
}

void run_later(self_ptr self, const pb::Task& task, std::chrono::milliseconds after,
               pb::TaskOutcome outcome) {
  self->state.running[task.id()] = execution{task.attempt(), task.type()};
  self->delayed_send(self, after, finished_atom_v, std::move(outcome));
  self->delayed_send(self, std::chrono::milliseconds{task.timeout_ms()}, caf::timeout_atom_v,
                     task.id(), task.attempt());
}

void execute(self_ptr self, const pb::Task& task) {
  const auto& executor = self->state.options.cfg->type_config(task.type()).executor;
  if (executor == "noop") {
    record(self, outcome_of(task, pb::OUTCOME_SUCCEEDED));
  } else if (executor == "fail") {
    record(self, outcome_of(task, pb::OUTCOME_FAIL, "the fail executor fails every task"));
  } else if (executor == "sleep") {
    auto ms = std::chrono::milliseconds{sleep_millis(task.payload())};
    run_later(self, task, ms, outcome_of(task, pb::OUTCOME_SUCCEEDED));
  } else {
    record(self, outcome_of(task, pb::OUTCOME_RETRY,
                            "no executor for type " + task.type() + " on node " +
                                self->state.options.node));
  }
}

dispatcher_actor::behavior_type dispatcher(self_ptr self, dispatcher_options options) {
  self->state.options = std::move(options);
  return {
      [self](dispatch_atom, const pb::TaskList& list) {
        for (const auto& task : list.tasks()) execute(self, task);
      },
      [self](finished_atom, pb::TaskOutcome& outcome) {
        auto& running = self->state.running;
        auto it = running.find(outcome.task_id());
        if (it == running.end() || it->second.attempt != outcome.attempt()) return;
        running.erase(it);
        record(self, std::move(outcome));
      },
      [self](caf::timeout_atom, int64_t id, int32_t attempt) {
        auto& running = self->state.running;
        auto it = running.find(id);
        if (it == running.end() || it->second.attempt != attempt) return;
        pb::TaskOutcome outcome;
        outcome.set_task_id(id);
        outcome.set_attempt(attempt);
        outcome.set_type(it->second.type);
        outcome.set_outcome(pb::OUTCOME_RETRY);
        outcome.set_error("timed out");
        running.erase(it);
        record(self, std::move(outcome));
      },
      [self](caf::flush_atom) {
        auto& st = self->state;
        st.flush_scheduled = false;
        if (st.unreported.outcomes_size() == 0) return;
        pb::TaskOutcomes batch;
        batch.Swap(&st.unreported);
        report(self, std::move(batch));
      },
      [self](report_atom, pb::TaskOutcomes& outcomes) { report(self, std::move(outcomes)); },
  };
}

}  // namespace

dispatcher_actor spawn_dispatcher(caf::actor_system& sys, dispatcher_options options) {
  return sys.spawn(dispatcher, std::move(options));
}

}  // namespace taskmill
