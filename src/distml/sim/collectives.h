// A collective's rounds of messages (network.h), as distml's own algorithms send them
// (comm/algorithms/), so that the simulator's all-reduce is the one the run makes.
#pragma once

#include <string_view>
#include <vector>

#include "distml/comm/types.h"
#include "distml/sim/network.h"

namespace distml::sim {

/// The rounds of an all-reduce of `bytes` over every rank of `cluster` by `algorithm`:
///  - ring: 2(n-1) steps, each rank sending a 1/n block to the next (ring_allreduce.cc);
///  - halving_doubling: the ranks above the largest power of two p' fold into their
///    neighbours, then log2 p' halvings (S/2, S/4, ... to the partner at distance p'/2, p'/4,
///    ...) and the same doublings back, then the unfold (halving_doubling_allreduce.cc);
///  - tree: a binomial reduce to rank 0 and a broadcast back, S at each hand-off;
///  - hierarchical: within each host a reduce-scatter through shared memory, a ring across
///    the hosts for each block (the hosts' rings run side by side, sharing the NICs), an
///    all-gather within the host (hierarchical_allreduce.cc);
///  - shm: the reduce-scatter and all-gather within one host;
///  - native: the engine's own. Modelled as MPI's (Open MPI's fixed decision: recursive
///    doubling, S at each of log2 n steps, below 10,000 bytes; a ring above) and gloo's
///    (c10d's ring); the local engine's is shared memory.
/// `automatic` must be resolved first (comm/auto_policy.h).
std::vector<Round> allreduce_rounds(comm::Algorithm algorithm, std::string_view engine,
                                    double bytes, const Cluster& cluster);

/// The rounds of an all-gather of `bytes` from every rank: a ring of n - 1 steps, each rank
/// passing one rank's `bytes` to the next (ring_allgather.cc; the engines' own are taken to be
/// rings too).
std::vector<Round> allgather_rounds(double bytes, const Cluster& cluster);

/// The rounds of a reduce-scatter of `bytes` into n blocks: a ring of n - 1 steps, each rank
/// passing a block to the next (ring_reduce_scatter.cc: distml's own on every engine).
std::vector<Round> reduce_scatter_rounds(double bytes, const Cluster& cluster);

}  // namespace distml::sim
