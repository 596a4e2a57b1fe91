// A model as a sequence of layers, so that a pipeline can cut it into stages: applying the
// layers in order is the model's forward. Built-in models (mlp, lenet5, resnet20) list theirs
// and run their forward through them, so the two cannot differ; a TorchScript model's layers
// are its top-level children (an nn.Sequential).
#pragma once

#include <torch/types.h>

#include <functional>
#include <string>
#include <vector>

#include "distml/nn/model_tensors.h"

namespace distml::nn {

struct Layer {
  std::string name;                  // for messages: "linears.0", "layer2.1", "fc"
  std::vector<std::string> modules;  // the submodules whose parameters and buffers it owns
  std::function<torch::Tensor(const torch::Tensor&)> forward;
};

/// The layers in order applied to `x`.
inline torch::Tensor run_layers(const std::vector<Layer>& layers, torch::Tensor x) {
  for (const auto& layer : layers) x = layer.forward(x);
  return x;
}

/// The tensors of `all` that belong to one of `modules` (names "module." + rest), in order.
inline ModelTensors select_modules(const ModelTensors& all,
                                   const std::vector<std::string>& modules) {
  auto owned = [&](const std::string& name) {
    for (const auto& m : modules)
      if (name.size() > m.size() && name.compare(0, m.size(), m) == 0 && name[m.size()] == '.')
        return true;
    return false;
  };
  ModelTensors out;
  for (std::size_t i = 0; i < all.parameters.size(); ++i)
    if (owned(all.parameter_names[i])) {
      out.parameter_names.push_back(all.parameter_names[i]);
      out.parameters.push_back(all.parameters[i]);
    }
  for (std::size_t i = 0; i < all.buffers.size(); ++i)
    if (owned(all.buffer_names[i])) {
      out.buffer_names.push_back(all.buffer_names[i]);
      out.buffers.push_back(all.buffers[i]);
    }
  return out;
}

}  // namespace distml::nn
