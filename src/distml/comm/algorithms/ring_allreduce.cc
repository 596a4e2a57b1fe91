// Ring all-reduce as a stream of chunks. Step s < P-1 reduces (reduce-scatter), later steps
// copy (all-gather). Rank r sends block r at step 0; at every later step it sends exactly the
// block it received at the step before, so each received chunk is forwarded at once and the
// steps overlap instead of running one after the other.
#include <algorithm>

#include "distml/comm/algorithms/algorithms.h"
#include "distml/comm/reduce.h"

namespace distml::comm {

void ring_allreduce(AlgoContext& ctx, Buffer data, ReduceOp op, std::size_t chunk_bytes) {
  const int p = ctx.size(), r = ctx.rank();
  if (p == 1 || data.count == 0) return;
  const std::size_t es = dtype_size(data.dtype);
  const std::size_t chunk = std::max<std::size_t>(1, chunk_bytes / es);  // elements per chunk
  const int right = (r + 1) % p, left = (r + p - 1) % p;
  const int steps = 2 * (p - 1);
  auto* base = static_cast<std::byte*>(data.data);

  // Rank r receives block r-s-1 (mod p) at step s, in both phases.
  auto recv_block = [&](int s) { return ((r - s - 1) % p + 2 * p) % p; };
  const std::size_t max_block = block_range(data.count, p, 0).size();
  std::byte* tmp[2] = {ctx.scratch(2 * max_block * es), nullptr};
  tmp[1] = tmp[0] + max_block * es;

  std::vector<RequestPtr> sends, recvs[2];
  auto post_recvs = [&](int s) {
    auto blk = block_range(data.count, p, recv_block(s));
    auto& reqs = recvs[s % 2];
    reqs.clear();
    for (std::size_t off = 0; off < blk.size(); off += chunk) {
      std::size_t n = std::min(chunk, blk.size() - off);
      std::byte* dst = s < p - 1 ? tmp[s % 2] + off * es : base + (blk.begin + off) * es;
      reqs.push_back(ctx.irecv(dst, n * es, left, s));
    }
  };
  auto send_chunk = [&](BlockRange blk, std::size_t off, int s) {
    std::size_t n = std::min(chunk, blk.size() - off);
    sends.push_back(ctx.isend(base + (blk.begin + off) * es, n * es, right, s));
  };

  post_recvs(0);
  auto first = block_range(data.count, p, r);
  for (std::size_t off = 0; off < first.size(); off += chunk) send_chunk(first, off, 0);

  for (int s = 0; s < steps; ++s) {
    if (s + 1 < steps) post_recvs(s + 1);
    auto blk = block_range(data.count, p, recv_block(s));
    auto& reqs = recvs[s % 2];
    for (std::size_t k = 0, off = 0; off < blk.size(); ++k, off += chunk) {
      ctx.wait(reqs[k]);
      if (s < p - 1) {
        std::size_t n = std::min(chunk, blk.size() - off);
        reduce_into(base + (blk.begin + off) * es, tmp[s % 2] + off * es, n, data.dtype, op);
      }
      if (s + 1 < steps) send_chunk(blk, off, s + 1);
    }
  }
  ctx.wait_all(sends);
}

}  // namespace distml::comm
