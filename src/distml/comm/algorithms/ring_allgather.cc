// Ring all-gather with per-rank counts: at step s rank r forwards the block it received at
// step s-1 (its own at step 0). P-1 steps, each moving one block per link.
#include <numeric>

#include "distml/comm/algorithms/algorithms.h"

namespace distml::comm {

void ring_allgatherv(AlgoContext& ctx, Buffer out, std::span<const std::size_t> counts) {
  const int p = ctx.size(), r = ctx.rank();
  if (p == 1) return;
  const std::size_t es = dtype_size(out.dtype);
  std::vector<std::size_t> offset(p + 1, 0);
  std::partial_sum(counts.begin(), counts.end(), offset.begin() + 1);
  auto* base = static_cast<std::byte*>(out.data);
  const int right = (r + 1) % p, left = (r + p - 1) % p;
  for (int s = 0; s < p - 1; ++s) {
    const int send_blk = (r - s + p) % p, recv_blk = (r - s - 1 + p) % p;
    ctx.sendrecv(base + offset[send_blk] * es, counts[send_blk] * es, right,
                 base + offset[recv_blk] * es, counts[recv_blk] * es, left, s);
  }
}

}  // namespace distml::comm
