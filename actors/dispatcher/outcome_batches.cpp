#include "actors/dispatcher/outcome_batches.hpp"

#include <algorithm>

namespace taskmill {

namespace {

bool in(const pb::TaskOutcomes& outcomes, int64_t task_id) {
  return std::any_of(outcomes.outcomes().begin(), outcomes.outcomes().end(),
                     [task_id](const pb::TaskOutcome& o) { return o.task_id() == task_id; });
}

}  // namespace

void outcome_batches::record(pb::TaskOutcome outcome) {
  *recorded_.add_outcomes() = std::move(outcome);
}

outcome_batches::batch outcome_batches::take_recorded() {
  if (recorded_.outcomes_size() == 0) return nullptr;
  auto taken = std::make_shared<pb::TaskOutcomes>();
  taken->Swap(&recorded_);
  on_their_way_.push_back(taken);
  return taken;
}

void outcome_batches::sending(batch one) {
  on_their_way_.push_back(std::move(one));
}

void outcome_batches::answered(const batch& one) {
  auto it = std::find(on_their_way_.begin(), on_their_way_.end(), one);
  if (it != on_their_way_.end()) on_their_way_.erase(it);
}

void outcome_batches::failed(const batch& one) {
  answered(one);
  to_send_again_.push_back(one);
}

outcome_batches::batch outcome_batches::take_failed() {
  if (to_send_again_.empty()) return nullptr;
  auto first = std::move(to_send_again_.front());
  to_send_again_.pop_front();
  on_their_way_.push_back(first);
  return first;
}

// Searched rather than indexed: it is asked for tasks handed off and after a
// claim's answer was lost, and the batches on their way are few (one a round
// trip), while indexing would cost every claimed task on the hot path.
bool outcome_batches::holds(int64_t task_id) const {
  auto held = [task_id](const batch& b) { return in(*b, task_id); };
  return in(recorded_, task_id) || std::any_of(on_their_way_.begin(), on_their_way_.end(), held) ||
         std::any_of(to_send_again_.begin(), to_send_again_.end(), held);
}

int32_t outcome_batches::not_stored() const {
  auto count = recorded_.outcomes_size();
  for (const auto& b : on_their_way_) count += b->outcomes_size();
  for (const auto& b : to_send_again_) count += b->outcomes_size();
  return count;
}

}  // namespace taskmill
