// The median of a few timings: what benchmarks and profiles report, robust to a stray slow run.
#pragma once

#include <algorithm>
#include <vector>

#include "distml/core/error.h"

namespace distml {

/// The middle value (the mean of the two middle ones for an even count); `v` is not empty.
inline double median(std::vector<double> v) {
  DML_CHECK(!v.empty(), "the median of no values");
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace distml
