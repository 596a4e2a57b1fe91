// All-to-all with every transfer posted at once; the engine moves them in any order.
#include <cstring>

#include "distml/comm/algorithms/algorithms.h"

namespace distml::comm {

void pairwise_alltoall(AlgoContext& ctx, ConstBuffer in, Buffer out) {
  const int p = ctx.size(), r = ctx.rank();
  const std::size_t block = out.bytes() / p;
  auto* src = static_cast<const std::byte*>(in.data);
  auto* dst = static_cast<std::byte*>(out.data);
  std::memcpy(dst + r * block, src + r * block, block);
  std::vector<RequestPtr> reqs;
  for (int s = 1; s < p; ++s) {
    const int from = (r - s + p) % p, to = (r + s) % p;
    reqs.push_back(ctx.irecv(dst + from * block, block, from, 0));
    reqs.push_back(ctx.isend(src + to * block, block, to, 0));
  }
  ctx.wait_all(reqs);
}

}  // namespace distml::comm
