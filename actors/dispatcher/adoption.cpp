#include "actors/dispatcher/dispatcher_state.hpp"

#include "messages/errors.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>

namespace taskmill::dispatching {

namespace {

/// Whether a task runs here or its outcome is on its way to the database.
bool knows(const dispatcher_state& st, int64_t task_id) {
  return st.running.count(task_id) > 0 || st.outcomes.holds(task_id);
}

/// The task the hand-off notification of `running`'s i-th task carried, if
/// it did and the pusher let it run so.
const pb::Task* carried(const pb::Executions& running, int i) {
  if (i >= running.tasks_size() || running.tasks(i).id() != running.task_ids(i)) return nullptr;
  return &running.tasks(i);
}

/// Reads whole the executions in `unknown` that still run here under their
/// attempt and runs them with what is left of their timeout. Storage stores
/// this dispatcher's outcomes in the order they were sent, so an outcome
/// stored since the read shows there.
void read_and_run(self_ptr self, const pb::Executions& unknown) {
  self->request(self->state.options.storage, local_request_timeout, running_atom_v, unknown)
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
            self->delayed_send(self, retry_delay, adopt_atom_v, unknown);
          });
}

}  // namespace

// Those this dispatcher knows are left. Hand-offs whose notification carried
// the task run at once; the rest are read first. Each takes a permit: of
// those the pusher held for its offer (permits_held, which go back whatever
// runs), or one of its own. A stopping node runs none: it hands back what
// runs here.
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
  if (unknown.task_ids_size() > 0) {
    read_and_run(self, unknown);
    return;
  }
  if (unknown.permits_held() == 0) return;
  pb::PermitUse back;
  back.set_permits(unknown.permits_held());
  self->send(st.options.limiter, settle_atom_v, std::move(back));
}

}  // namespace taskmill::dispatching
