// Ring reduce-scatter: like the first half of ring all-reduce, shifted by one block so that
// rank r ends up holding block r. Works on a copy of the input in scratch memory.
#include <cstring>

#include "distml/comm/algorithms/algorithms.h"
#include "distml/comm/reduce.h"

namespace distml::comm {

void ring_reduce_scatter(AlgoContext& ctx, ConstBuffer in, Buffer out, ReduceOp op) {
  const int p = ctx.size(), r = ctx.rank();
  const std::size_t es = dtype_size(out.dtype), block = out.count * es;
  if (block == 0) return;
  if (p == 1) {
    std::memmove(out.data, in.data, block);
    return;
  }
  std::byte* work = ctx.scratch(block * (p + 1));
  std::byte* tmp = work + block * p;
  std::memcpy(work, in.data, block * p);
  const int right = (r + 1) % p, left = (r + p - 1) % p;
  for (int s = 0; s < p - 1; ++s) {
    const int send_blk = (r - s - 1 + 2 * p) % p, recv_blk = (r - s - 2 + 2 * p) % p;
    ctx.sendrecv(work + send_blk * block, block, right, tmp, block, left, s);
    reduce_into(work + recv_blk * block, tmp, out.count, out.dtype, op);
  }
  std::memcpy(out.data, work + r * block, block);
}

}  // namespace distml::comm
