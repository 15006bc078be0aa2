#include "actors/limits/fair_shares.hpp"

#include <algorithm>

namespace taskmill {

fair_shares::fair_shares(std::array<int, levels> weights) : weights_(weights) {
  active_.fill(true);
}

int fair_shares::active_weight() const {
  int sum = 0;
  for (int l = 0; l < levels; ++l)
    if (active_[l]) sum += weights_[l];
  return sum;
}

std::vector<int> fair_shares::turns(int n) const {
  std::vector<int> out;
  for (int l = 0; l < levels; ++l)
    if (!active_[l]) out.push_back(l + 1);
  auto weight = active_weight();
  if (weight == 0) return out;
  // Each turn adds every level's share of one claim to its credit and goes
  // to the level owed most (smooth weighted round robin).
  auto credit = credit_;
  for (int i = 0; i < n; ++i) {
    int next = -1;
    for (int l = 0; l < levels; ++l) {
      if (!active_[l]) continue;
      credit[l] += static_cast<double>(weights_[l]) / weight;
      if (next < 0 || credit[l] > credit[next]) next = l;
    }
    credit[next] -= 1;
    out.push_back(next + 1);
  }
  return out;
}

fair_shares::counts fair_shares::levels_of(const std::vector<int>& turns, int taken) {
  counts out{};
  auto first = std::min(static_cast<size_t>(std::max(0, taken)), turns.size());
  for (size_t i = 0; i < first; ++i) ++out[turns[i] - 1];
  return out;
}

void fair_shares::settle(const std::vector<int>& turns, int taken, const counts& claimed) {
  auto kept_turns = active_;
  mark_dry_levels(levels_of(turns, taken), claimed);
  for (int l = 0; l < levels; ++l) kept_turns[l] = kept_turns[l] && active_[l];
  charge_credits(kept_turns, claimed);
}

void fair_shares::mark_dry_levels(const counts& offered, const counts& claimed) {
  for (int l = 0; l < levels; ++l) {
    if (claimed[l] < offered[l]) {
      active_[l] = false;
      credit_[l] = 0;
    } else if (claimed[l] > 0) {
      active_[l] = true;
    }
  }
}

void fair_shares::charge_credits(const std::array<bool, levels>& charged, const counts& claimed) {
  // Shares of what these levels claimed, whatever cut the round short; claims
  // beyond a share came from room others left unused.
  int total = 0;
  int weight = 0;
  for (int l = 0; l < levels; ++l) {
    if (!charged[l]) continue;
    total += claimed[l];
    weight += weights_[l];
  }
  if (total == 0) return;
  for (int l = 0; l < levels; ++l) {
    if (!charged[l]) continue;
    double share = static_cast<double>(total) * weights_[l] / weight;
    credit_[l] = std::clamp(credit_[l] + share - claimed[l], -(share + 1), share + 1);
  }
}

}  // namespace taskmill
