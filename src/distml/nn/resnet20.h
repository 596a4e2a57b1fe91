// ResNet-20 for small images (He et al. 2016, section 4.2): a 3x3 stem, three stages of three
// basic blocks with 16/32/64 channels, global average pooling and one Linear layer.
// Shortcuts are option A (parameter-free): identity, or stride-2 subsampling with zero-padded
// channels where a stage halves the side, so the model has the paper's 0.27M parameters.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/pimpl.h>

#include <cstdint>
#include <vector>

#include "distml/nn/layers.h"

namespace distml::nn {

/// conv3x3-BN-ReLU-conv3x3-BN, plus the option-A shortcut, then ReLU.
class BasicBlockImpl : public torch::nn::Module {
 public:
  BasicBlockImpl(int64_t in_planes, int64_t planes, int64_t stride);
  torch::Tensor forward(torch::Tensor x);

 private:
  int64_t in_planes_, planes_, stride_;
  torch::nn::Conv2d conv1_{nullptr}, conv2_{nullptr};
  torch::nn::BatchNorm2d bn1_{nullptr}, bn2_{nullptr};
};
TORCH_MODULE(BasicBlock);

class ResNet20Impl : public torch::nn::Module {
 public:
  /// Any square `image_size` works (28 -> 28/14/7 per stage; 32 as on CIFAR-10).
  ResNet20Impl(int64_t in_channels, int64_t image_size, int64_t num_classes);
  /// [B, C, H, W] or [B, C*H*W] -> [B, num_classes] logits.
  torch::Tensor forward(torch::Tensor x);
  /// The stem (conv1, bn1, ReLU), each of the nine blocks, and the head (pooling, fc).
  std::vector<Layer> layers();

 private:
  int64_t in_channels_, image_size_;
  torch::nn::Conv2d conv1_{nullptr};
  torch::nn::BatchNorm2d bn1_{nullptr};
  torch::nn::Sequential layer1_{nullptr}, layer2_{nullptr}, layer3_{nullptr};
  torch::nn::Linear fc_{nullptr};
};
TORCH_MODULE(ResNet20);

}  // namespace distml::nn
