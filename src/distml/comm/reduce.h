// Element-wise reduction kernels shared by every algorithm and engine.
#pragma once

#include <cstddef>

#include "distml/comm/types.h"

namespace distml::comm {

/// acc[i] = acc[i] (op) in[i] for i < count. `avg` accumulates like `sum`; call
/// divide_by(world size) once at the end. f16/bf16 are combined in f32 and rounded back.
void reduce_into(void* acc, const void* in, std::size_t count, DType dtype, ReduceOp op);

/// out[i] = a[i] (op) b[i]; `out` may alias `a` or `b`.
void reduce_pair(void* out, const void* a, const void* b, std::size_t count, DType dtype,
                 ReduceOp op);

/// data[i] /= divisor (the last step of `avg`).
void divide_by(void* data, std::size_t count, DType dtype, int divisor);

}  // namespace distml::comm
