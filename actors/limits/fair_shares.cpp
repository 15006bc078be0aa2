#include "actors/limits/fair_shares.hpp"

#include <algorithm>
#include <cmath>

namespace taskmill {

fair_shares::fair_shares(std::array<int, levels> weights) : weights_(weights) {
  active_.fill(true);
}

fair_shares::counts fair_shares::quotas(int n) {
  counts out{};
  int active_weight = 0;
  for (int l = 0; l < levels; ++l)
    if (active_[l]) active_weight += weights_[l];
  for (int l = 0; l < levels; ++l) {
    if (!active_[l]) {
      // A probe on top of the shares: it takes a claim only if there is work.
      share_[l] = 0;
      out[l] = 1;
      continue;
    }
    share_[l] = static_cast<double>(n) * weights_[l] / active_weight;
    credit_[l] = std::min(credit_[l] + share_[l], share_[l] + 1);
    out[l] = std::max(0, static_cast<int>(std::floor(credit_[l])));
  }
  return out;
}

void fair_shares::settle(const counts& asked, const counts& claimed) {
  for (int l = 0; l < levels; ++l) {
    if (claimed[l] < asked[l]) {
      // Ran dry: no share, and no credit kept for later.
      active_[l] = false;
      credit_[l] = 0;
      continue;
    }
    active_[l] = true;
    // Claims beyond the quota came from capacity others left unused; they are
    // repaid within about a round.
    credit_[l] = std::max(credit_[l] - claimed[l], -(share_[l] + 1));
  }
}

}  // namespace taskmill
