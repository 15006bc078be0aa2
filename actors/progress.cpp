#include "actors/progress.hpp"

#include "messages/errors.hpp"

#include <caf/actor_system.hpp>
#include <caf/typed_event_based_actor.hpp>

#include <unordered_map>
#include <vector>

namespace taskmill {

namespace {

/// The latest report of one task not yet sent, and who waits for its answer.
struct waiting_report {
  pb::Progress report;
  std::vector<caf::typed_response_promise<pb::ResultAck>> promises;
};

}  // namespace

struct progress_state {
  static inline const char* name = "progress";
  progress_options options;
  std::unordered_map<int64_t, waiting_report> waiting;
  // A statement is under way: reports meanwhile wait for the next one.
  bool storing = false;
};

namespace {

using self_ptr = progress_actor::stateful_pointer<progress_state>;

/// A newer report of the same attempt keeps what it leaves out.
void merge(pb::Progress& kept, const pb::Progress& newer) {
  if (kept.attempt() != newer.attempt()) {
    kept = newer;
    return;
  }
  bool had_progress = kept.has_progress();
  double progress = kept.progress();
  bool had_message = kept.has_message();
  auto message = kept.message();
  kept = newer;
  if (!kept.has_progress() && had_progress) kept.set_progress(progress);
  if (!kept.has_message() && had_message) kept.set_message(message);
}

void answer(std::vector<caf::typed_response_promise<pb::ResultAck>>& promises, bool applied,
            int32_t attempt) {
  pb::ResultAck ack;
  ack.set_accepted(applied);
  if (!applied)
    ack.set_reason("stale: the task is not running under attempt " + std::to_string(attempt));
  for (auto& p : promises) p.deliver(ack);
}

/// Sends what waits, one statement at a time.
void store(self_ptr self) {
  auto& st = self->state;
  if (st.storing || st.waiting.empty()) return;
  st.storing = true;
  auto sent = std::make_shared<std::unordered_map<int64_t, waiting_report>>();
  sent->swap(st.waiting);
  pb::ProgressReports reports;
  for (const auto& [id, w] : *sent) {
    reports.add_task_ids(id);
    *reports.add_reports() = w.report;
  }
  self->request(st.options.storage, local_request_timeout, progress_atom_v, std::move(reports))
      .then(
          [self, sent](const pb::ProgressAcks& acks) {
            for (int i = 0; i < acks.task_ids_size(); ++i) {
              auto it = sent->find(acks.task_ids(i));
              if (it == sent->end()) continue;
              answer(it->second.promises, acks.applied(i), it->second.report.attempt());
            }
            self->state.storing = false;
            store(self);
          },
          [self, sent](const caf::error& err) {
            for (auto& [id, w] : *sent)
              for (auto& p : w.promises) p.deliver(err);
            self->state.storing = false;
            store(self);
          });
}

progress_actor::behavior_type progress(self_ptr self, progress_options options) {
  self->state.options = std::move(options);
  return {
      [](ping_atom) { return caf::ok_atom_v; },
      [self](progress_atom, int64_t id, pb::Progress& report) -> caf::result<pb::ResultAck> {
        auto promise = self->make_response_promise<pb::ResultAck>();
        auto [it, fresh] = self->state.waiting.try_emplace(id);
        if (fresh)
          it->second.report = std::move(report);
        else
          merge(it->second.report, report);
        it->second.promises.push_back(promise);
        store(self);
        return promise;
      },
  };
}

}  // namespace

progress_actor spawn_progress(caf::actor_system& sys, progress_options options) {
  return sys.spawn(progress, std::move(options));
}

}  // namespace taskmill
