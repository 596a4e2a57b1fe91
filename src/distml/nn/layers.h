// A model as a sequence of layers, so that a pipeline can cut it into stages: applying the
// layers in order is the model's forward. Built-in models (mlp, lenet5, resnet20) list theirs
// and run their forward through them, so the two cannot differ; a TorchScript model's layers
// are its top-level children (an nn.Sequential).
#pragma once

#include <torch/nn/modules/linear.h>
#include <torch/types.h>

#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "distml/nn/model_tensors.h"

namespace distml::nn {

using TensorFn = std::function<torch::Tensor(const torch::Tensor&)>;

struct Layer {
  std::string name;                  // for messages: "linears.0", "layer2.1", "fc"
  std::vector<std::string> modules;  // the submodules whose parameters and buffers it owns
  TensorFn forward;
  /// Set when the layer is after(linear(before(x))) with an element-wise `after` (an
  /// activation): tensor parallelism can then split its Linear across ranks.
  struct Affine {
    torch::nn::Linear linear;
    TensorFn before, after;  // either may be empty: the identity
  };
  std::optional<Affine> affine = std::nullopt;
};

/// The layer after(linear(before(x))); `after` must be element-wise (see Layer::affine).
inline Layer linear_layer(std::string name, torch::nn::Linear linear, TensorFn before = {},
                          TensorFn after = {}) {
  Layer::Affine affine{std::move(linear), std::move(before), std::move(after)};
  auto forward = [affine](const torch::Tensor& x) {
    auto y = affine.linear.ptr()->forward(affine.before ? affine.before(x) : x);
    return affine.after ? affine.after(y) : y;
  };
  std::vector<std::string> modules{name};
  return {std::move(name), std::move(modules), std::move(forward), std::move(affine)};
}

/// The layers in order applied to `x`.
inline torch::Tensor run_layers(const std::vector<Layer>& layers, torch::Tensor x) {
  for (const auto& layer : layers) x = layer.forward(x);
  return x;
}

/// Whether the tensor called `name` belongs to one of `modules` (its name is "module." + rest).
inline bool owned_by(const std::string& name, const std::vector<std::string>& modules) {
  for (const auto& m : modules)
    if (name.size() > m.size() && name.compare(0, m.size(), m) == 0 && name[m.size()] == '.')
      return true;
  return false;
}

/// The tensors of `all` that belong to one of `modules`, in order.
inline ModelTensors select_modules(const ModelTensors& all,
                                   const std::vector<std::string>& modules) {
  ModelTensors out;
  for (std::size_t i = 0; i < all.parameters.size(); ++i)
    if (owned_by(all.parameter_names[i], modules)) {
      out.parameter_names.push_back(all.parameter_names[i]);
      out.parameters.push_back(all.parameters[i]);
    }
  for (std::size_t i = 0; i < all.buffers.size(); ++i)
    if (owned_by(all.buffer_names[i], modules)) {
      out.buffer_names.push_back(all.buffer_names[i]);
      out.buffers.push_back(all.buffers[i]);
    }
  return out;
}

/// Told by a model's constructor about each layer as soon as its weights are drawn, before the
/// next layer is built: the layer's tensors, named as in the whole model. ZeRO stage 3 keeps
/// its rank's block of each layer and frees the rest, so that no rank holds the whole model.
using LayerBuilt = std::function<void(const ModelTensors& layer)>;

/// Tells `built`, if set, about the layer made of `modules`, as registered in `model` so far.
inline void tell_built(const LayerBuilt& built, const torch::nn::Module& model,
                       const std::vector<std::string>& modules) {
  if (built) built(select_modules(parameters_and_buffers(model), modules));
}

}  // namespace distml::nn
