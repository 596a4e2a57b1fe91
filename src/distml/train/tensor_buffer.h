// Where torch tensors meet the communication layer: a contiguous tensor viewed as a
// comm::Buffer over its own memory (no copy).
#pragma once

#include <torch/torch.h>

#include "distml/comm/types.h"
#include "distml/core/error.h"

namespace distml::train {

inline comm::DType comm_dtype(torch::ScalarType t) {
  switch (t) {
    case torch::kFloat32: return comm::DType::f32;
    case torch::kFloat64: return comm::DType::f64;
    case torch::kFloat16: return comm::DType::f16;
    case torch::kBFloat16: return comm::DType::bf16;
    case torch::kInt32: return comm::DType::i32;
    case torch::kInt64: return comm::DType::i64;
    case torch::kUInt8: return comm::DType::u8;
    default: throw UsageError(cat("no communication dtype for torch type ", c10::toString(t)));
  }
}

/// The tensor's memory as a Buffer. It must be contiguous and stay alive while in use.
inline comm::Buffer buffer_of(const torch::Tensor& t) {
  DML_CHECK(t.is_contiguous(), "only contiguous tensors can be communicated");
  return {t.data_ptr(), static_cast<std::size_t>(t.numel()), comm_dtype(t.scalar_type())};
}

}  // namespace distml::train
