#include <algorithm>

#include "distml/comm/algorithms/algorithms.h"
#include "distml/core/error.h"

namespace distml::comm {

void hierarchical_allreduce(AlgoContext& ctx, Buffer data, ReduceOp op,
                            std::span<const int> host_of, ShmSegment& host,
                            std::size_t chunk_bytes) {
  const int me = ctx.rank();
  DML_CHECK(static_cast<int>(host_of.size()) == ctx.size(),
            "hierarchical all-reduce: ", host_of.size(), " host entries for ", ctx.size(),
            " ranks");
  // Each host's ranks in rank order; the hosts in the order of their lowest rank.
  std::vector<int> hosts;
  for (int h : host_of)
    if (std::find(hosts.begin(), hosts.end(), h) == hosts.end()) hosts.push_back(h);
  std::vector<std::vector<int>> ranks_of(hosts.size());
  for (int r = 0; r < ctx.size(); ++r)
    ranks_of[std::find(hosts.begin(), hosts.end(), host_of[r]) - hosts.begin()].push_back(r);
  const auto& local = ranks_of[std::find(hosts.begin(), hosts.end(), host_of[me]) - hosts.begin()];
  const int per_host = static_cast<int>(local.size());
  const int index = static_cast<int>(std::find(local.begin(), local.end(), me) - local.begin());
  std::vector<int> across;  // the rank at `index` on every host
  for (const auto& ranks : ranks_of) {
    DML_CHECK(static_cast<int>(ranks.size()) == per_host,
              "hierarchical all-reduce needs the same number of ranks on every host");
    across.push_back(ranks[index]);
  }

  DML_CHECK(host.size() == per_host && host.rank() == index,
            "hierarchical all-reduce: the host's segment is not this host's");
  shm_collective(ctx, host, data, op, ShmStep::reduce_scatter);
  const auto block = block_range(data.count, per_host, index);
  Buffer mine{static_cast<std::byte*>(data.data) + block.begin * dtype_size(data.dtype),
              block.size(), data.dtype};
  AlgoContext between = ctx.group(across);
  ring_allreduce(between, mine, op, chunk_bytes);
  shm_collective(ctx, host, data, op, ShmStep::allgather);
}

}  // namespace distml::comm
