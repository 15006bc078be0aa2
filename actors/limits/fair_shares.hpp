#pragma once

// Weighted shares of claims per priority level (SPEC §4, fairness).
//
// While several levels have due work each gets claims in proportion to its
// weight, deterministically. A round's claims are handed out as turns, a level
// per claim, interleaved by weight from the credit each level has built up;
// the database takes as many turns as the limits leave it room for, from the
// first, passing over levels without due work, and says how far it went. So a
// claim cut short by a cluster-wide limit still shares what room there was by
// weight, and a level the room did not reach is owed its claims in later
// rounds. A level that ran dry (it was passed over, or claimed fewer than its
// turns) stops taking turns; it keeps a probe of one claim per round, first
// in the round and passed over while it has no due work, so that new work
// there is seen within a round. Whatever the turns leave unused the claim
// fills in priority order, so capacity is never idle while any level has due
// work; those claims are repaid within about a round.

#include <array>
#include <climits>
#include <vector>

namespace taskmill {

class fair_shares {
 public:
  static constexpr int levels = 5;
  using counts = std::array<int, levels>;

  explicit fair_shares(std::array<int, levels> weights);

  /// The level (1 to 5) of each claim of a round of `n`, in turn: a probe of
  /// each level that ran dry, then `n` turns shared by weight.
  std::vector<int> turns(int n) const;

  /// Books what a round claimed per level (index 0: priority 1) when the
  /// database went through the first `taken` of the `turns` it was given.
  void settle(const std::vector<int>& turns, int taken, const counts& claimed);

  /// Turns per level (index 0: priority 1) among the first `taken` (all by
  /// default).
  static counts levels_of(const std::vector<int>& turns, int taken = INT_MAX);

 private:
  int active_weight() const;
  void mark_dry_levels(const counts& offered, const counts& claimed);
  /// Moves the credit of the `charged` levels by their share of what they
  /// claimed together against what each claimed.
  void charge_credits(const std::array<bool, levels>& charged, const counts& claimed);

  std::array<int, levels> weights_;
  std::array<bool, levels> active_;
  // Claims owed to each level (negative: claims taken ahead of its share).
  std::array<double, levels> credit_{};
};

}  // namespace taskmill
