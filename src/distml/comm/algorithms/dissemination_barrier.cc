// Dissemination barrier (Hensgen, Finkel & Manber 1988): in round k each rank signals the
// rank 2^k ahead and waits for the one 2^k behind; after ceil(log2 P) rounds all have arrived.
#include "distml/comm/algorithms/algorithms.h"

namespace distml::comm {

void dissemination_barrier(AlgoContext& ctx) {
  const int p = ctx.size(), r = ctx.rank();
  std::byte out{1}, in{0};
  for (int k = 1, round = 0; k < p; k <<= 1, ++round)
    ctx.sendrecv(&out, 1, (r + k) % p, &in, 1, (r - k + p) % p, round);
}

}  // namespace distml::comm
