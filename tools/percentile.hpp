#pragma once

// The nearest-rank percentile the bench and the scenario harness report.

#include <algorithm>
#include <cmath>
#include <vector>

namespace taskmill {

/// The value at `fraction` (0.99 for p99) of `sorted`, ascending; 0 if empty.
inline double percentile(const std::vector<double>& sorted, double fraction) {
  if (sorted.empty()) return 0;
  auto rank = static_cast<size_t>(std::ceil(fraction * static_cast<double>(sorted.size())));
  return sorted[std::clamp<size_t>(rank, 1, sorted.size()) - 1];
}

}  // namespace taskmill
