// Option checks shared by the models, and the reshaping that lets image models (lenet5,
// resnet20) accept the flattened rows a dataset reader yields as well as [B, C, H, W] batches.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <string>

#include "distml/core/error.h"

namespace distml::nn::detail {

inline void check_positive(const char* model, const char* option, int64_t value) {
  if (value <= 0) throw ConfigError(cat(model, ": ", option, " must be > 0, got ", value));
}

/// [B, C*H*W] -> [B, C, H, W]; a 4-d input passes through unchanged.
inline torch::Tensor as_image_batch(const torch::Tensor& x, int64_t channels, int64_t size) {
  if (x.dim() == 4) return x;
  return x.reshape({x.size(0), channels, size, size});
}

}  // namespace distml::nn::detail
