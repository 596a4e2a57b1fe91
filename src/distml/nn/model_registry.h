// The model zoo's entry point: builds a model by name from ModelOptions, so that trainers,
// benchmarks and the CLI pick architectures from config without knowing the module types.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/container/any.h>
#include <torch/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace distml::nn {

/// What to build. Only the fields the named model reads matter; the rest keep their defaults.
/// Fill it with designated initialisers: `ModelOptions{.name = "lenet5"}`.
struct ModelOptions {
  std::string name;                                            // mlp, lenet5, resnet20, char_lstm
  std::vector<int64_t> mlp_layers = {784, 1024, 512, 10};      // mlp: widths, input first
  int64_t in_channels = 1, image_size = 28, num_classes = 10;  // lenet5, resnet20
  int64_t vocab_size = 0, embedding_dim = 64, hidden_size = 256, lstm_layers = 1;  // char_lstm
};

/// A built model: one torch::nn::Module behind a Tensor -> Tensor forward.
/// Copies share the same module (like torch::nn::ModuleHolder); build another model with the
/// same seed for an independent replica.
class Model {
 public:
  Model(std::string name, torch::nn::AnyModule module);

  /// Image models take [B, C, H, W] or flattened [B, C*H*W] floats and return [B, classes];
  /// char_lstm takes [B, T] int64 and returns [B, T, vocab] logits.
  torch::Tensor forward(const torch::Tensor& input) { return module_.forward(input); }

  /// The underlying module, for optimizers, to(device), train()/eval(), serialisation.
  torch::nn::Module& module() const { return *module_.ptr(); }
  std::vector<torch::Tensor> parameters() const { return module().parameters(); }
  torch::OrderedDict<std::string, torch::Tensor> named_parameters() const {
    return module().named_parameters();
  }
  /// Non-trainable state that replicas must also agree on (BatchNorm running statistics).
  torch::OrderedDict<std::string, torch::Tensor> named_buffers() const {
    return module().named_buffers();
  }
  const std::string& name() const { return name_; }

 private:
  std::string name_;
  torch::nn::AnyModule module_;
};

/// The names make_model accepts, in the order error messages list them.
const std::vector<std::string>& model_names();

/// Builds the named model with torch's default generator, so `torch::manual_seed(s)` before
/// the call makes the weights reproducible. Throws ConfigError for an unknown name or an
/// option the model cannot use (the message says which).
Model make_model(const ModelOptions& options);

}  // namespace distml::nn
