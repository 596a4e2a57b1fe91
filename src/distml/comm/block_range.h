// How a vector of n elements is cut into P nearly equal blocks, the same way everywhere.
#pragma once

#include <algorithm>
#include <cstddef>

namespace distml::comm {

/// Element range [begin, end) of block `i` when `n` elements are cut into `parts` blocks
/// whose sizes differ by at most one (the first n % parts blocks get the extra element).
struct BlockRange {
  std::size_t begin, end;
  std::size_t size() const { return end - begin; }
};
inline BlockRange block_range(std::size_t n, int parts, int i) {
  const std::size_t base = n / parts, extra = n % parts, u = static_cast<std::size_t>(i);
  const std::size_t begin = base * u + std::min(u, extra);
  return {begin, begin + base + (u < extra ? 1 : 0)};
}

}  // namespace distml::comm
