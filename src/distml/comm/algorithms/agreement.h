// Do all ranks make the same call? One small all-reduce over point-to-point compares the
// call's signature across ranks, so that a mismatch is an error on every rank instead of
// a hang or a corrupted buffer.
#pragma once

#include <cstdint>

#include "distml/comm/algorithms/context.h"

namespace distml::comm {

/// What must agree between ranks for one collective call.
struct CallSignature {
  std::int64_t operation, count, dtype, root, reduce_op;
};

/// Every rank contributes its signature and its negation; one max tree all-reduce gives each
/// field's maximum and minimum. Throws CommError, prefixed with ctx.what(), naming the first
/// field that differs; `operation_names[operation]` spells the operation field.
void check_agreement(AlgoContext& ctx, const CallSignature& mine,
                     const char* const* operation_names);

}  // namespace distml::comm
