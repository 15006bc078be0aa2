#include "actors/executors/caf_executors.hpp"

#include "actors/executors/outcome.hpp"
#include "messages/errors.hpp"

#include <algorithm>

namespace taskmill {

bool caf_executor_pool::member::runs(const std::string& type) const {
  return std::find(types.begin(), types.end(), type) != types.end();
}

caf::error caf_executor_pool::add(executor_actor handle,
                                  const pb::ExecutorRegistration& registration) {
  if (!handle || registration.types_size() == 0 || registration.capacity() < 1)
    return make_error(errc::invalid_argument,
                      "an executor needs types and a capacity of at least 1");
  members_.push_back({std::move(handle),
                      {registration.types().begin(), registration.types().end()},
                      registration.capacity(),
                      0});
  return {};
}

std::vector<std::string> caf_executor_pool::remove(const caf::actor_addr& gone) {
  auto it = std::find_if(members_.begin(), members_.end(),
                         [&](const member& m) { return m.handle.address() == gone; });
  if (it == members_.end()) return {};
  auto types = std::move(it->types);
  members_.erase(it);
  return types;
}

executor_actor caf_executor_pool::take(const std::string& type) {
  member* best = nullptr;
  for (auto& m : members_)
    if (m.runs(type) && (!best || m.busy - m.capacity < best->busy - best->capacity)) best = &m;
  if (!best) return {};
  ++best->busy;
  return best->handle;
}

void caf_executor_pool::release(const caf::actor_addr& executor) {
  for (auto& m : members_)
    if (m.handle.address() == executor) --m.busy;
}

int32_t caf_executor_pool::capacity(const std::string& type) const {
  int32_t sum = 0;
  for (const auto& m : members_)
    if (m.runs(type)) sum += m.capacity;
  return sum;
}

pb::TaskOutcome outcome_of_reply(const pb::Task& task, pb::TaskOutcome reply) {
  if (reply.outcome() == pb::EXECUTION_OUTCOME_UNSPECIFIED)
    return outcome_of(task, pb::OUTCOME_RETRY, "the executor answered no outcome");
  return outcome_of(task, reply.outcome(), reply.error(), reply.result());
}

pb::TaskOutcome outcome_of_failure(const pb::Task& task, const caf::error& err) {
  // The answer to a request can beat the executor's down message.
  if (err == caf::sec::request_receiver_down)
    return outcome_of(task, pb::OUTCOME_RETRY, executor_went_away);
  return outcome_of(task, pb::OUTCOME_RETRY, "executor failed: " + error_message(err));
}

}  // namespace taskmill
