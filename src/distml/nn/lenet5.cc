#include "distml/nn/lenet5.h"

#include <torch/nn/functional/activation.h>
#include <torch/nn/functional/pooling.h>

#include <utility>

#include "distml/core/error.h"
#include "distml/nn/model_input.h"

namespace distml::nn {

LeNet5Impl::LeNet5Impl(int64_t in_channels, int64_t image_size, int64_t num_classes,
                       const LayerBuilt& built)
    : in_channels_(in_channels), image_size_(image_size) {
  detail::check_positive("lenet5", "in_channels", in_channels);
  detail::check_positive("lenet5", "num_classes", num_classes);
  // Side after conv1 (same) + pool, conv2 (valid 5x5) + pool.
  const int64_t side = (image_size / 2 - 4) / 2;
  if (image_size < 12 || side < 1)
    throw ConfigError(cat("lenet5: image_size must be >= 12, got ", image_size));
  conv1_ = register_module(
      "conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(in_channels, 6, 5).padding(2)));
  tell_built(built, *this, {"conv1"});
  conv2_ = register_module("conv2", torch::nn::Conv2d(6, 16, 5));
  tell_built(built, *this, {"conv2"});
  fc1_ = register_module("fc1", torch::nn::Linear(16 * side * side, 120));
  tell_built(built, *this, {"fc1"});
  fc2_ = register_module("fc2", torch::nn::Linear(120, 84));
  tell_built(built, *this, {"fc2"});
  fc3_ = register_module("fc3", torch::nn::Linear(84, num_classes));
  tell_built(built, *this, {"fc3"});
}

torch::Tensor LeNet5Impl::forward(torch::Tensor x) { return run_layers(layers(), std::move(x)); }

std::vector<Layer> LeNet5Impl::layers() {
  // Shared pointers, so that the layers outlive this call (the holders would be const here).
  auto conv1 = conv1_.ptr(), conv2 = conv2_.ptr();
  const TensorFn flatten = [](const torch::Tensor& x) { return x.flatten(1); };
  const TensorFn relu = [](const torch::Tensor& x) { return torch::relu(x); };
  const int64_t channels = in_channels_, side = image_size_;
  return {
      {"conv1",
       {"conv1"},
       [=](const torch::Tensor& x) {
         return torch::max_pool2d(
             torch::relu(conv1->forward(detail::as_image_batch(x, channels, side))), 2);
       }},
      {"conv2",
       {"conv2"},
       [=](const torch::Tensor& x) {
         return torch::max_pool2d(torch::relu(conv2->forward(x)), 2);
       }},
      linear_layer("fc1", fc1_, flatten, relu),
      linear_layer("fc2", fc2_, {}, relu),
      linear_layer("fc3", fc3_),
  };
}

}  // namespace distml::nn
