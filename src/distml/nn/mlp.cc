#include "distml/nn/mlp.h"

#include <torch/nn/functional/activation.h>
#include <torch/nn/modules/linear.h>

#include <cstddef>
#include <utility>

#include "distml/core/error.h"

namespace distml::nn {

MlpImpl::MlpImpl(const std::vector<int64_t>& layers, const LayerBuilt& built) {
  if (layers.size() < 2)
    throw ConfigError(cat("mlp: mlp_layers needs at least 2 widths, got ", layers.size()));
  for (int64_t w : layers)
    if (w <= 0) throw ConfigError(cat("mlp: mlp_layers widths must be > 0, got ", w));
  register_module("linears", linears_);
  for (std::size_t i = 0; i + 1 < layers.size(); ++i) {
    linears_->push_back(torch::nn::Linear(layers[i], layers[i + 1]));
    tell_built(built, *this, {cat("linears.", i)});
  }
}

torch::Tensor MlpImpl::forward(torch::Tensor x) { return run_layers(layers(), std::move(x)); }

std::vector<Layer> MlpImpl::layers() {
  std::vector<Layer> out;
  const std::size_t n = linears_->size();
  const TensorFn flatten = [](const torch::Tensor& x) { return x.flatten(1); };
  const TensorFn relu = [](const torch::Tensor& x) { return torch::relu(x); };
  for (std::size_t i = 0; i < n; ++i)
    out.push_back(linear_layer(cat("linears.", i),
                               torch::nn::Linear(linears_->ptr<torch::nn::LinearImpl>(i)),
                               i == 0 ? flatten : TensorFn(), i + 1 == n ? TensorFn() : relu));
  return out;
}

}  // namespace distml::nn
