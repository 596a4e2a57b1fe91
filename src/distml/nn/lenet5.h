// LeNet-5 (LeCun et al. 1998) with ReLU and max-pooling, as commonly used on MNIST.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/pimpl.h>

#include <cstdint>
#include <vector>

#include "distml/nn/layers.h"

namespace distml::nn {

class LeNet5Impl : public torch::nn::Module {
 public:
  /// conv 6@5x5 pad 2, pool 2, conv 16@5x5, pool 2, fc 120, fc 84, fc num_classes; ReLU after
  /// each but the last. `image_size` (square, at least 12) sets the width of fc 120's input.
  /// `built` hears of each layer as it is made (layers.h).
  LeNet5Impl(int64_t in_channels, int64_t image_size, int64_t num_classes,
             const LayerBuilt& built = {});
  /// [B, C, H, W] or [B, C*H*W] -> [B, num_classes] logits.
  torch::Tensor forward(torch::Tensor x);
  /// conv1 and conv2 (each with ReLU and pooling), fc1, fc2, fc3.
  std::vector<Layer> layers();

 private:
  int64_t in_channels_, image_size_;
  torch::nn::Conv2d conv1_{nullptr}, conv2_{nullptr};
  torch::nn::Linear fc1_{nullptr}, fc2_{nullptr}, fc3_{nullptr};
};
TORCH_MODULE(LeNet5);

}  // namespace distml::nn
