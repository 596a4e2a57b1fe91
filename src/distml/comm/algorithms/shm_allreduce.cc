// The ranks of one host reduce through a shared segment instead of sending. Block j of the data
// (block_range(count, P, j)) is rank j's to reduce. The data passes in pieces, so that a piece
// is still in cache when it is reduced and copied out: piece t is, in every block, the t-th run
// of part_bytes. Per piece, in the slot buffer after the last piece's:
//  1. every rank copies its piece of each block j into part j of its own slot; barrier;
//  2. rank j reduces part j over all slots, rank 0's first (the serial left fold's order),
//     into its data, and for the all-reduce also back into part j of rank 0's slot; barrier;
//  3. (all-reduce) every rank copies the other parts of rank 0's slot into its data.
// The all-gather alone is 3. after each rank has put its own part into rank 0's slot. The ranks
// first compare what they were called with: nothing else would notice a count that differs.
// Two slot buffers, used in turn across pieces and collectives, make one barrier per step
// enough: a rank writes piece n + 2 into a buffer only after every rank has passed piece
// n + 1's first barrier, so has finished reading piece n from it.
#include <cstring>

#include "distml/comm/algorithms/algorithms.h"
#include "distml/comm/reduce.h"

namespace distml::comm {

void shm_collective(AlgoContext& ctx, ShmSegment& seg, Buffer data, ReduceOp op, ShmStep step) {
  const int me = seg.rank(), ranks = seg.size();
  const std::size_t es = dtype_size(data.dtype);
  const std::size_t piece = seg.part_bytes() / es;  // a whole number of pages
  auto* base = static_cast<std::byte*>(data.data);
  const std::size_t largest = block_range(data.count, ranks, 0).size();
  const std::size_t shift =
      seg.agree(ctx,
                {data.count, static_cast<std::uint64_t>(data.dtype), static_cast<std::uint64_t>(op),
                 static_cast<std::uint64_t>(step)},
                data.data);
  // Part j of piece t: where it lies in the data, how many elements it has, and where in a
  // slot (its offset in a page follows the data's, `shift` bytes on).
  auto part = [&](int j, std::size_t t, std::size_t& count) {
    const auto block = block_range(data.count, ranks, j);
    const std::size_t begin = std::min(block.begin + t * piece, block.end);
    count = std::min(block.end, begin + piece) - begin;
    return base + begin * es;
  };
  auto in_slot = [&](int buffer, int r, int j) {
    return seg.part(buffer, r, j, (shift + block_range(data.count, ranks, j).begin * es) % 4096);
  };
  for (std::size_t t = 0; t * piece < largest; ++t) {
    const int b = seg.next_buffer();
    std::size_t count = 0;
    if (step == ShmStep::allgather) {
      std::byte* mine = part(me, t, count);
      std::memcpy(in_slot(b, 0, me), mine, count * es);
    } else {
      for (int j = 0; j < ranks; ++j) {  // 1.
        std::byte* from = part(j, t, count);
        std::memcpy(in_slot(b, me, j), from, count * es);
      }
      seg.barrier(ctx);
      std::byte* mine = part(me, t, count);  // 2.
      if (ranks == 1) continue;
      reduce_pair(mine, in_slot(b, 0, me), in_slot(b, 1, me), count, data.dtype, op);
      for (int r = 2; r < ranks; ++r) reduce_into(mine, in_slot(b, r, me), count, data.dtype, op);
      if (step == ShmStep::reduce_scatter) continue;
      std::memcpy(in_slot(b, 0, me), mine, count * es);
    }
    seg.barrier(ctx);
    for (int j = 0; j < ranks; ++j) {  // 3.
      if (j == me) continue;
      std::byte* to = part(j, t, count);
      std::memcpy(to, in_slot(b, 0, j), count * es);
    }
  }
}

}  // namespace distml::comm
