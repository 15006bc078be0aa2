#pragma once

// Weighted shares of claims per priority level (SPEC §4, fairness).
//
// While several levels have due work each gets claims in proportion to its
// weight, deterministically: fractional shares carry over as credit, so the
// counts follow the weights to within a claim or so per level and round. A
// level that ran dry stops taking a share; it keeps a probe of one claim per
// round, on top of the shares, so that new work there is seen within a round. Whatever the quotas
// leave unused the claim fills in priority order, so capacity is never idle
// while any level has due work.

#include <array>

namespace taskmill {

class fair_shares {
 public:
  static constexpr int levels = 5;
  using counts = std::array<int, levels>;

  explicit fair_shares(std::array<int, levels> weights);

  /// Claims per level (index 0: priority 1) for a round of `n` claims.
  counts quotas(int n);

  /// Books what a round asked with `asked` (from quotas) actually claimed.
  void settle(const counts& asked, const counts& claimed);

 private:
  std::array<int, levels> weights_;
  std::array<bool, levels> active_;
  std::array<double, levels> credit_{};
  std::array<double, levels> share_{};
};

}  // namespace taskmill
