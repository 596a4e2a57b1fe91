// Collective algorithms written once over point-to-point, so that they run on every engine.
// All are in-place on `data` unless they take an input view; all ranks must call the same
// algorithm with the same counts. `op` is never avg here (the Communicator divides).
#pragma once

#include <span>

#include "distml/comm/algorithms/context.h"
#include "distml/comm/shm_segment.h"

namespace distml::comm {

/// Reduce-scatter then all-gather around a ring; each block streams in `chunk_bytes` pieces,
/// and a piece is forwarded as soon as it is reduced. Bandwidth-optimal: 2(P-1)/P of the data.
void ring_allreduce(AlgoContext& ctx, Buffer data, ReduceOp op, std::size_t chunk_bytes);

/// Two-level all-reduce, as Horovod's and NCCL's hierarchical modes: a reduce-scatter among the
/// ranks of each host through their shared segment `host`, then an all-reduce of each block
/// across the hosts among the ranks that hold it (one per host, each block on its own ring, all
/// at once), then an all-gather within each host through the segment. Across the hosts' links
/// it sends 2 (H-1)/H of the data per host instead of the flat ring's 2 (P-1)/P per rank.
/// `host_of[r]` is rank r's host; every host must hold the same number of ranks.
void hierarchical_allreduce(AlgoContext& ctx, Buffer data, ReduceOp op,
                            std::span<const int> host_of, ShmSegment& host,
                            std::size_t chunk_bytes);

/// Shared memory among the ranks of one host (`seg`, mapped by all of them; shm_allreduce.cc):
/// reduce_scatter leaves block_range(count, P, r) reduced at rank r, allgather sends each rank's
/// block r to every rank, allreduce does both, piece by piece.
enum class ShmStep { reduce_scatter, allgather, allreduce };
void shm_collective(AlgoContext& ctx, ShmSegment& seg, Buffer data, ReduceOp op, ShmStep step);

/// Rabenseifner: recursive halving reduce-scatter, recursive doubling all-gather. A world
/// that is not a power of two first folds its extra ranks into partners, and unfolds last.
void halving_doubling_allreduce(AlgoContext& ctx, Buffer data, ReduceOp op);

/// Binomial-tree reduce to rank 0, then binomial-tree broadcast: log P latency, for small data.
void tree_allreduce(AlgoContext& ctx, Buffer data, ReduceOp op);
void tree_broadcast(AlgoContext& ctx, Buffer data, int root);

/// Ring all-gather of counts[r] elements from each rank r into `out`, in rank order.
/// Rank r's own block must already be in place in `out`.
void ring_allgatherv(AlgoContext& ctx, Buffer out, std::span<const std::size_t> counts);

/// Ring reduce-scatter: `in` holds P blocks of out.count elements; rank r gets block r reduced.
void ring_reduce_scatter(AlgoContext& ctx, ConstBuffer in, Buffer out, ReduceOp op);

/// Every rank sends block j of `in` to rank j, posted all at once; out must not alias in.
void pairwise_alltoall(AlgoContext& ctx, ConstBuffer in, Buffer out);

/// Dissemination barrier: ceil(log2 P) rounds of one-byte messages.
void dissemination_barrier(AlgoContext& ctx);

}  // namespace distml::comm
