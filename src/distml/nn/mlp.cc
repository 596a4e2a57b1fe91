#include "distml/nn/mlp.h"

#include <torch/nn/functional/activation.h>
#include <torch/nn/modules/linear.h>

#include <cstddef>

#include "distml/core/error.h"

namespace distml::nn {

MlpImpl::MlpImpl(const std::vector<int64_t>& layers) {
  if (layers.size() < 2)
    throw ConfigError(cat("mlp: mlp_layers needs at least 2 widths, got ", layers.size()));
  for (int64_t w : layers)
    if (w <= 0) throw ConfigError(cat("mlp: mlp_layers widths must be > 0, got ", w));
  for (std::size_t i = 0; i + 1 < layers.size(); ++i)
    linears_->push_back(torch::nn::Linear(layers[i], layers[i + 1]));
  register_module("linears", linears_);
}

torch::Tensor MlpImpl::forward(torch::Tensor x) {
  x = x.flatten(1);
  for (std::size_t i = 0; i < linears_->size(); ++i) {
    x = linears_[i]->as<torch::nn::Linear>()->forward(x);
    if (i + 1 < linears_->size()) x = torch::relu(x);
  }
  return x;
}

}  // namespace distml::nn
