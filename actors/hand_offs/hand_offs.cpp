#include "actors/hand_offs/hand_offs.hpp"

#include <algorithm>
#include <utility>

namespace taskmill {

hand_offs::hand_offs(int32_t permits, int64_t numbered_from)
    : permits_{permits}, last_generation_{numbered_from} {}

void hand_offs::listener_connected() {
  hearing_ = true;
  in_doubt(generation_);
}

bool hand_offs::wants_offer() const {
  return permits_ > 0 && generation_ == 0;
}

int32_t hand_offs::permits_to_offer() const {
  return hearing_ && wants_offer() && !asking_ ? permits_ : 0;
}

hand_offs::offer hand_offs::to_top_up() const {
  auto wanted = permits_ - offered_;
  if (generation_ == 0 || withdrawn_ || asking_ || wanted < offered_) return {};
  return {generation_, wanted};
}

void hand_offs::asking(bool under_way) {
  asking_ = under_way;
}

std::optional<hand_offs::offer> hand_offs::make(int32_t permits) {
  if (generation_ != 0) return std::nullopt;
  generation_ = ++last_generation_;
  offered_ = permits;
  return offer{generation_, permits};
}

bool hand_offs::top_up(int64_t generation, int32_t permits) {
  if (generation_ != generation) return false;
  offered_ += permits;
  return true;
}

int32_t hand_offs::refused(int64_t generation, int32_t permits) {
  if (generation_ != generation) return 0;
  offered_ -= permits;
  if (offered_ <= 0) generation_ = 0;
  return permits;
}

void hand_offs::in_doubt(int64_t generation) {
  if (generation_ == generation && generation != 0) withdrawn_ = true;
}

pb::Executions hand_offs::heard(pb::HandOffs& hand_offs) {
  pb::Executions run;
  run.set_handed_off(true);
  int32_t of_offer = 0;
  int32_t of_kept = 0;
  for (auto& hand_off : *hand_offs.mutable_hand_offs()) {
    auto generation = hand_off.generation();
    run.add_task_ids(hand_off.task_id());
    run.add_attempts(hand_off.attempt());
    auto* task = run.add_tasks();
    if (generation > offers_before_read_) task->Swap(hand_off.mutable_task());
    if (generation == generation_ && offered_ - of_offer > 0) {
      ++of_offer;
      continue;
    }
    if (auto kept = kept_for_unheard_.find(generation); kept != kept_for_unheard_.end()) {
      ++of_kept;
      if (--kept->second == 0) kept_for_unheard_.erase(kept);
      continue;
    }
    if (generation == withdrawing_generation_) ++heard_while_withdrawing_;
  }
  offered_ -= of_offer;
  run.set_permits_held(of_offer + of_kept);
  return run;
}

std::optional<hand_offs::offer> hand_offs::withdraw() {
  if (generation_ == 0 || withdrawn_) return std::nullopt;
  withdrawn_ = true;
  return offer{generation_, offered_};
}

hand_offs::settled hand_offs::withdrawn(const offer& withdrawn, int32_t taken) {
  if (generation_ != withdrawn.generation) return {};
  auto heard = withdrawn.permits - offered_;
  auto unheard = std::clamp(taken - heard, 0, offered_);
  auto free = offered_ - unheard;
  generation_ = 0;
  offered_ = 0;
  withdrawn_ = false;
  return {keep(withdrawn.generation, unheard), free};
}

hand_offs::offer hand_offs::take_over(bool after_short_claim, bool permits_short) {
  if (after_short_claim && !withdrawn_ && !permits_short) return {};
  offer over{std::exchange(generation_, 0), std::exchange(offered_, 0)};
  withdrawn_ = false;
  if (over.permits > 0 && over.generation != withdrawing_generation_) {
    withdrawing_generation_ = over.generation;
    heard_while_withdrawing_ = 0;
  }
  return over;
}

hand_offs::kept hand_offs::claim_took_back(const offer& over, int32_t handed_unheard) {
  auto unheard = std::clamp(handed_unheard - heard_while_withdrawing_, 0, over.permits);
  withdrawing_generation_ = 0;
  heard_while_withdrawing_ = 0;
  return keep(over.generation, unheard);
}

void hand_offs::claim_lost(const offer& over) {
  if (over.generation == 0) return;
  generation_ = over.generation;
  offered_ = over.permits;
  withdrawn_ = true;
}

int32_t hand_offs::release(int64_t generation) {
  auto kept = kept_for_unheard_.find(generation);
  if (kept == kept_for_unheard_.end()) return 0;
  auto permits = kept->second;
  kept_for_unheard_.erase(kept);
  return permits;
}

int32_t hand_offs::read_what_runs() {
  offers_before_read_ = last_generation_;
  auto all = kept_permits();
  kept_for_unheard_.clear();
  return all;
}

int32_t hand_offs::kept_permits() const {
  int32_t all = 0;
  for (const auto& [generation, permits] : kept_for_unheard_) all += permits;
  return all;
}

hand_offs::kept hand_offs::keep(int64_t generation, int32_t permits) {
  if (permits <= 0) return {};
  kept_for_unheard_[generation] += permits;
  return {generation, permits};
}

}  // namespace taskmill
