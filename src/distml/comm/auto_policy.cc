#include "distml/comm/auto_policy.h"

namespace distml::comm {
namespace {

// From `distml bench allreduce --algo native,ring,hd,tree` at 2, 3 and 4 ranks on this
// project's 2-core machines (docs/benchmarks.md has the tables):
//  - mpi: MPI's own collective is fastest up to 16 MiB (its small-message latency is ~0.5 us,
//    which no point-to-point algorithm approaches); from 32 MiB on, distml's
//    halving-doubling over MPI point-to-point moves data 1.7-1.9x faster than MPI_Allreduce.
//  - local: the shared-memory native collective wins from 16 KiB; below, the binomial tree's
//    log P hand-offs beat its two full barriers.
//  - gloo: c10d's allreduce hands every call to its worker thread (after distml's agreement
//    check). Since the engine's point-to-point has connections of its own (December 2026), up
//    to 1 MiB the tree and the ring take 0.06-0.45x c10d's time at 2-4 ranks; up to 512 KiB
//    the tree's log P hand-offs take 0.6-0.75x the ring's time at 3-4 ranks (a tie at 2). From
//    1 MiB the ring, which sends each byte 2(P-1)/P times, takes 0.2-0.9x the tree's time at
//    3-4 ranks (one 4-rank run at 16 MiB: 1.4x; at 2 ranks 0.7-1.4x) and 0.5-1.05x c10d's.
//    On one host, the shared-memory all-reduce takes 0.02-0.5x the tree's time at 2 and 3
//    ranks from 4 B to 16 MiB (its two barriers, ~33 us at 4 B, against the tree's TCP
//    hand-offs, ~80 us), so every size goes through it there.
constexpr std::size_t kMpiHalvingDoublingMinBytes = 32u << 20;
constexpr std::size_t kLocalTreeMaxBytes = 16u << 10;
constexpr std::size_t kGlooTreeMaxBytes = 512u << 10;

// Across 2 hosts x 2 ranks in network namespaces (1 Gbit/s and 100 Mbit/s links), the
// hierarchical all-reduce, which reduces within each host through shared memory and sends
// each block across once, ties MPI_Allreduce up to 4 MiB and at 64 MiB and takes 0.37x the
// time of halving-doubling at 64 MiB (whose first exchange crosses the link with half the
// data); over gloo it ties the tree at 1 MiB and takes 0.50x its time at 16 MiB.
constexpr std::size_t kGlooHierarchicalMinBytes = 1u << 20;

}  // namespace

Algorithm auto_allreduce_algorithm(std::string_view engine, int world_size, std::size_t bytes,
                                   int hosts, int ranks_per_host) {
  if (world_size <= 1) return Algorithm::native;
  if (hosts > 1 && ranks_per_host > 1) {
    if (engine == "mpi" && bytes >= kMpiHalvingDoublingMinBytes) return Algorithm::hierarchical;
    if (engine == "gloo" && bytes >= kGlooHierarchicalMinBytes) return Algorithm::hierarchical;
  }
  if (engine == "mpi")
    return bytes >= kMpiHalvingDoublingMinBytes ? Algorithm::halving_doubling : Algorithm::native;
  if (engine == "local") return bytes <= kLocalTreeMaxBytes ? Algorithm::tree : Algorithm::native;
  if (engine == "gloo" && hosts == 1) return Algorithm::shm;
  if (engine == "gloo") return bytes <= kGlooTreeMaxBytes ? Algorithm::tree : Algorithm::ring;
  return Algorithm::native;
}

}  // namespace distml::comm
