#include "distml/comm/algorithms/agreement.h"

#include "distml/comm/algorithms/algorithms.h"

namespace distml::comm {

void check_agreement(AlgoContext& ctx, const CallSignature& mine,
                     const char* const* operation_names) {
  const std::int64_t sig[5] = {mine.operation, mine.count, mine.dtype, mine.root, mine.reduce_op};
  std::int64_t both[10];
  for (int i = 0; i < 5; ++i) both[i] = sig[i], both[5 + i] = -sig[i];
  tree_allreduce(ctx, Buffer{both, 10, DType::i64}, ReduceOp::max);
  const char* fields[5] = {"operation", "element count", "dtype", "root", "reduce op"};
  for (int i = 0; i < 5; ++i) {
    const std::int64_t lo = -both[5 + i], hi = both[i];
    if (lo == hi) continue;
    std::string range = i == 0 ? cat(operation_names[lo], " and ", operation_names[hi])
                               : cat("values from ", lo, " to ", hi);
    throw CommError(
        cat(ctx.what(), ": ranks disagree on the ", fields[i], " (", range, " across ranks)"));
  }
}

}  // namespace distml::comm
