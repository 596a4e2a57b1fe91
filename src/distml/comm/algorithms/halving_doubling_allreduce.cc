// Recursive halving-doubling (Rabenseifner). With P not a power of two, let P' be the
// largest power of two below P and e = P - P'. Ranks 0..2e-1 pair up: each even rank hands
// its vector to the odd rank above it and sits out; the P' remaining ranks run the
// power-of-two algorithm under new ranks 0..P'-1; finally each odd rank hands the result back.
#include <algorithm>
#include <bit>

#include "distml/comm/algorithms/algorithms.h"
#include "distml/comm/reduce.h"

namespace distml::comm {

void halving_doubling_allreduce(AlgoContext& ctx, Buffer data, ReduceOp op) {
  const int p = ctx.size(), r = ctx.rank();
  if (p == 1 || data.count == 0) return;
  const std::size_t es = dtype_size(data.dtype);
  auto* base = static_cast<std::byte*>(data.data);
  const int pow2 = static_cast<int>(std::bit_floor(static_cast<unsigned>(p)));
  const int extra = p - pow2;
  std::byte* tmp = ctx.scratch(data.bytes());
  constexpr int kFoldTag = 0, kUnfoldTag = 1, kStepTag = 2;

  // Fold the extra ranks in.
  int new_rank;
  if (r < 2 * extra) {
    if (r % 2 == 0) {
      auto s = ctx.isend(base, data.bytes(), r + 1, kFoldTag);
      ctx.wait(s);
      auto back = ctx.irecv(base, data.bytes(), r + 1, kUnfoldTag);
      ctx.wait(back);
      return;
    }
    auto in = ctx.irecv(tmp, data.bytes(), r - 1, kFoldTag);
    ctx.wait(in);
    reduce_into(base, tmp, data.count, data.dtype, op);
    new_rank = r / 2;
  } else {
    new_rank = r - extra;
  }
  auto real_rank = [&](int nr) { return nr < extra ? 2 * nr + 1 : nr + extra; };

  // Recursive halving: keep one half of the current range, reduce the partner's copy of it.
  struct Range {
    std::size_t lo, hi;
  };
  std::vector<Range> kept;  // the range held before each halving, for the doubling phase
  Range cur{0, data.count};
  int tag = kStepTag;
  for (int d = pow2 / 2; d >= 1; d /= 2, ++tag) {
    const int partner = real_rank(new_rank ^ d);
    const std::size_t mid = cur.lo + (cur.hi - cur.lo) / 2;
    const bool lower = (new_rank & d) == 0;
    Range keep = lower ? Range{cur.lo, mid} : Range{mid, cur.hi};
    Range give = lower ? Range{mid, cur.hi} : Range{cur.lo, mid};
    ctx.sendrecv(base + give.lo * es, (give.hi - give.lo) * es, partner, tmp,
                 (keep.hi - keep.lo) * es, partner, tag);
    reduce_into(base + keep.lo * es, tmp, keep.hi - keep.lo, data.dtype, op);
    kept.push_back(cur);
    cur = keep;
  }

  // Recursive doubling: exchange the finished halves back up the same levels.
  for (int d = 1; d < pow2; d *= 2, ++tag) {
    const int partner = real_rank(new_rank ^ d);
    Range whole = kept.back();
    kept.pop_back();
    Range other = cur.lo == whole.lo ? Range{cur.hi, whole.hi} : Range{whole.lo, cur.lo};
    ctx.sendrecv(base + cur.lo * es, (cur.hi - cur.lo) * es, partner, base + other.lo * es,
                 (other.hi - other.lo) * es, partner, tag);
    cur = whole;
  }

  if (r < 2 * extra) {
    auto s = ctx.isend(base, data.bytes(), r - 1, kUnfoldTag);
    ctx.wait(s);
  }
}

}  // namespace distml::comm
