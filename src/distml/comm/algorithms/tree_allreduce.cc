// Binomial trees: reduce towards rank 0 in log P rounds, then broadcast back down. Latency-
// optimal for small messages; every rank ends with bit-identical results.
#include "distml/comm/algorithms/algorithms.h"
#include "distml/comm/reduce.h"

namespace distml::comm {

void tree_allreduce(AlgoContext& ctx, Buffer data, ReduceOp op) {
  const int p = ctx.size(), r = ctx.rank();
  if (p == 1 || data.count == 0) return;
  std::byte* tmp = ctx.scratch(data.bytes());
  for (int mask = 1; mask < p; mask <<= 1) {
    if (r & mask) {
      auto s = ctx.isend(data.data, data.bytes(), r - mask, 0);
      ctx.wait(s);
      break;
    }
    if (r + mask < p) {
      auto in = ctx.irecv(tmp, data.bytes(), r + mask, 0);
      ctx.wait(in);
      reduce_into(data.data, tmp, data.count, data.dtype, op);
    }
  }
  tree_broadcast(ctx, data, 0);
}

void tree_broadcast(AlgoContext& ctx, Buffer data, int root) {
  const int p = ctx.size();
  if (p == 1 || data.count == 0) return;
  const int vr = (ctx.rank() - root + p) % p;  // rank relative to the root
  int mask = 1;
  for (; mask < p; mask <<= 1) {
    if (vr & mask) {
      auto in = ctx.irecv(data.data, data.bytes(), (vr - mask + root) % p, 1);
      ctx.wait(in);
      break;
    }
  }
  std::vector<RequestPtr> sends;
  for (mask >>= 1; mask > 0; mask >>= 1)
    if (vr + mask < p)
      sends.push_back(ctx.isend(data.data, data.bytes(), (vr + mask + root) % p, 1));
  ctx.wait_all(sends);
}

}  // namespace distml::comm
