// Multi-layer perceptron: Linear layers with ReLU between them, on flattened input.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/pimpl.h>

#include <cstdint>
#include <vector>

#include "distml/nn/layers.h"

namespace distml::nn {

class MlpImpl : public torch::nn::Module {
 public:
  /// `layers` are the widths, input first: {784, 1024, 512, 10} has three Linear layers.
  /// `built` hears of each Linear as it is made (layers.h).
  explicit MlpImpl(const std::vector<int64_t>& layers, const LayerBuilt& built = {});
  /// [B, ...] -> [B, layers.back()] logits (no activation after the last layer).
  torch::Tensor forward(torch::Tensor x);
  /// One layer per Linear (the first flattens, all but the last end in ReLU).
  std::vector<Layer> layers();

 private:
  torch::nn::ModuleList linears_;
};
TORCH_MODULE(Mlp);

}  // namespace distml::nn
