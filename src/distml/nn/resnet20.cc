#include "distml/nn/resnet20.h"

#include <torch/nn/functional/activation.h>
#include <torch/nn/init.h>

#include <string>
#include <utility>

#include "distml/nn/model_input.h"

namespace distml::nn {
namespace {

torch::nn::Conv2d conv3x3(int64_t in, int64_t out, int64_t stride) {
  return torch::nn::Conv2d(
      torch::nn::Conv2dOptions(in, out, 3).stride(stride).padding(1).bias(false));
}

constexpr int64_t kBlocksPerStage = 3;

}  // namespace

BasicBlockImpl::BasicBlockImpl(int64_t in_planes, int64_t planes, int64_t stride)
    : in_planes_(in_planes), planes_(planes), stride_(stride) {
  conv1_ = register_module("conv1", conv3x3(in_planes, planes, stride));
  bn1_ = register_module("bn1", torch::nn::BatchNorm2d(planes));
  conv2_ = register_module("conv2", conv3x3(planes, planes, 1));
  bn2_ = register_module("bn2", torch::nn::BatchNorm2d(planes));
}

torch::Tensor BasicBlockImpl::forward(torch::Tensor x) {
  torch::Tensor out = torch::relu(bn1_->forward(conv1_->forward(x)));
  out = bn2_->forward(conv2_->forward(out));
  torch::Tensor shortcut = x;
  if (stride_ != 1 || in_planes_ != planes_) {
    // Option A: take every stride-th pixel and pad the new channels with zeros on both sides.
    using torch::indexing::None;
    using torch::indexing::Slice;
    shortcut = x.index({Slice(), Slice(), Slice(None, None, stride_), Slice(None, None, stride_)});
    const int64_t extra = planes_ - in_planes_;
    shortcut = torch::constant_pad_nd(shortcut, {0, 0, 0, 0, extra / 2, extra - extra / 2});
  }
  return torch::relu(out + shortcut);
}

ResNet20Impl::ResNet20Impl(int64_t in_channels, int64_t image_size, int64_t num_classes)
    : in_channels_(in_channels), image_size_(image_size) {
  detail::check_positive("resnet20", "in_channels", in_channels);
  detail::check_positive("resnet20", "image_size", image_size);
  detail::check_positive("resnet20", "num_classes", num_classes);
  conv1_ = register_module("conv1", conv3x3(in_channels, 16, 1));
  bn1_ = register_module("bn1", torch::nn::BatchNorm2d(16));
  int64_t in_planes = 16;
  auto stage = [&](int64_t planes, int64_t stride) {
    torch::nn::Sequential s;
    for (int64_t b = 0; b < kBlocksPerStage; ++b) {
      s->push_back(BasicBlock(in_planes, planes, b == 0 ? stride : 1));
      in_planes = planes;
    }
    return s;
  };
  layer1_ = register_module("layer1", stage(16, 1));
  layer2_ = register_module("layer2", stage(32, 2));
  layer3_ = register_module("layer3", stage(64, 2));
  fc_ = register_module("fc", torch::nn::Linear(64, num_classes));
  // He initialisation for the convolutions, as in the paper; the rest keep torch's defaults.
  for (auto& p : named_parameters()) {
    if (p.key().find("conv") != std::string::npos)
      torch::nn::init::kaiming_normal_(p.value(), 0.0, torch::kFanOut, torch::kReLU);
  }
}

torch::Tensor ResNet20Impl::forward(torch::Tensor x) { return run_layers(layers(), std::move(x)); }

std::vector<Layer> ResNet20Impl::layers() {
  // Shared pointers, so that the layers outlive this call (the holders would be const here).
  auto conv1 = conv1_.ptr();
  auto bn1 = bn1_.ptr();
  auto fc = fc_.ptr();
  const int64_t channels = in_channels_, side = image_size_;
  std::vector<Layer> out = {{"stem", {"conv1", "bn1"}, [=](const torch::Tensor& x) {
                               return torch::relu(bn1->forward(
                                   conv1->forward(detail::as_image_batch(x, channels, side))));
                             }}};
  const std::pair<const char*, torch::nn::Sequential> stages[] = {
      {"layer1", layer1_}, {"layer2", layer2_}, {"layer3", layer3_}};
  for (const auto& [stage, blocks] : stages)
    for (std::size_t b = 0; b < blocks->size(); ++b) {
      const std::string name = cat(stage, ".", b);
      out.push_back(
          {name, {name}, [block = blocks->ptr<BasicBlockImpl>(b)](const torch::Tensor& x) {
             return block->forward(x);
           }});
    }
  out.push_back({"fc", {"fc"}, [=](const torch::Tensor& x) {
                   return fc->forward(x.mean({2, 3}));
                 }});
  return out;
}

}  // namespace distml::nn
