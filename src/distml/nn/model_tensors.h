// What the strategies keep consistent across replicas: a model's parameters and buffers by
// name, in the model's order. Built-in modules and TorchScript modules both yield one, so a
// strategy never needs to know which kind of model it trains.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/embedding.h>
#include <torch/types.h>

#include <algorithm>
#include <string>
#include <vector>

namespace distml::nn {

struct ModelTensors {
  std::vector<std::string> parameter_names;
  std::vector<torch::Tensor> parameters;  // all of them; strategies use those requiring grad
  std::vector<std::string> buffer_names;
  std::vector<torch::Tensor> buffers;  // BatchNorm running statistics and counters
  /// The parameters whose gradient backward makes sparse (the weight of an Embedding or
  /// EmbeddingBag built with sparse(true)): what the hybrid strategy serves by rows.
  std::vector<std::string> sparse_names;

  bool is_sparse(const std::string& parameter_name) const {
    return std::find(sparse_names.begin(), sparse_names.end(), parameter_name) !=
           sparse_names.end();
  }
};

/// The parameters and buffers of a torch::nn module (recursively, in registration order),
/// sharing storage with it; no sparse_names, so that a module being built can be asked.
inline ModelTensors parameters_and_buffers(const torch::nn::Module& module) {
  ModelTensors t;
  for (const auto& p : module.named_parameters()) {
    t.parameter_names.push_back(p.key());
    t.parameters.push_back(p.value());
  }
  for (const auto& b : module.named_buffers()) {
    t.buffer_names.push_back(b.key());
    t.buffers.push_back(b.value());
  }
  return t;
}

/// The tensors of a torch::nn module (recursively, in registration order). The tensors share
/// storage with the module.
inline ModelTensors tensors_of(const torch::nn::Module& module) {
  ModelTensors t = parameters_and_buffers(module);
  for (const auto& m : module.named_modules()) {
    const auto* embedding = m.value()->as<torch::nn::EmbeddingImpl>();
    const auto* bag = m.value()->as<torch::nn::EmbeddingBagImpl>();
    if ((embedding && embedding->options.sparse()) || (bag && bag->options.sparse()))
      t.sparse_names.push_back(m.key().empty() ? "weight" : m.key() + ".weight");
  }
  return t;
}

}  // namespace distml::nn
