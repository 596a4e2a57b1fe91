// The model zoo's entry point: builds a model by name from ModelOptions, or loads the user's
// TorchScript module, so that trainers, benchmarks and the CLI pick architectures from config
// without knowing the module types.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/container/any.h>
#include <torch/types.h>

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

#include "distml/nn/layers.h"
#include "distml/nn/model_tensors.h"

namespace torch::jit {
struct Module;
}

namespace distml::nn {

/// What to build. Only the fields the named model reads matter; the rest keep their defaults.
/// Fill it with designated initialisers: `ModelOptions{.name = "lenet5"}`.
struct ModelOptions {
  std::string name;    // mlp, lenet5, resnet20, char_lstm, fasttext, torchscript
  std::string path{};  // torchscript: the file torch.jit.save wrote
  std::vector<int64_t> mlp_layers = {784, 1024, 512, 10};      // mlp: widths, input first
  int64_t in_channels = 1, image_size = 28, num_classes = 10;  // lenet5, resnet20
  int64_t vocab_size = 0, embedding_dim = 64, hidden_size = 256, lstm_layers = 1;  // char_lstm
  // fasttext: vocab_size hash buckets of embedding_dim, num_classes outputs
};

/// A built model: a built-in torch::nn module, or a TorchScript module, behind one interface.
/// Copies share the same module (like torch::nn::ModuleHolder); build another model with the
/// same seed (or load the file again) for an independent replica.
class Model {
 public:
  using LayersFn = std::function<std::vector<Layer>()>;
  /// A built-in model; `layers` lists its layers, where it can be cut into pipeline stages.
  Model(std::string name, torch::nn::AnyModule module, LayersFn layers = {});
  /// A TorchScript module whose forward takes (x) and returns predictions, or takes (x, y) and
  /// returns a scalar loss (takes_target()).
  Model(std::string name, const torch::jit::Module& module);
  ~Model();
  Model(const Model&);
  Model& operator=(const Model&);

  /// Image models take [B, C, H, W] or flattened [B, C*H*W] floats and return [B, classes];
  /// char_lstm takes [B, T] int64 and returns [B, T, vocab] logits; fasttext takes [B, L] hashed
  /// n-gram ids (0 pads) as floats or ints and returns [B, classes]; a TorchScript model takes
  /// what its forward declares.
  torch::Tensor forward(const torch::Tensor& input);
  /// From now on forward(x) calls `forward` (every copy of this model): ZeRO-3 runs the
  /// layers itself, gathering each one's parameters just before it. Empty: the model's own.
  void run_forward_with(TensorFn forward) { *forward_ = std::move(forward); }
  /// A TorchScript model's forward(x, y): its own scalar loss.
  torch::Tensor forward_loss(const torch::Tensor& input, const torch::Tensor& target);
  /// True for a TorchScript module whose forward takes (x, y).
  bool takes_target() const;

  std::vector<torch::Tensor> parameters() const;
  torch::OrderedDict<std::string, torch::Tensor> named_parameters() const;
  /// Non-trainable state that replicas must also agree on (BatchNorm running statistics).
  torch::OrderedDict<std::string, torch::Tensor> named_buffers() const;
  /// Both of the above, as the strategies take them.
  ModelTensors tensors() const;

  /// Training mode (BatchNorm uses batch statistics, dropout is on) or evaluation mode.
  void train(bool on = true);
  void to(torch::ScalarType dtype);

  /// The model as layers that a pipeline can cut: a built-in model's own, or a TorchScript
  /// module's top-level children (its forward must apply them in order, as nn.Sequential's
  /// does). ConfigError for a model that is not a sequence of layers (char_lstm).
  std::vector<Layer> layers() const;
  /// For a model about to be cut into stages: ConfigError unless layers() stand for the whole
  /// model, that is, every parameter and buffer belongs to a layer and the layers applied in
  /// order to `probe` give what forward gives (within rounding; compared in float64, in
  /// evaluation mode, on a copy). Built-in models run their forward through their layers and
  /// pass by construction; a TorchScript module's forward may do more than call its children.
  void check_layers_are_forward(const torch::Tensor& probe) const;

  /// True for a TorchScript model; only those can be saved as TorchScript.
  bool is_script() const { return script_ != nullptr; }
  /// Writes the TorchScript module with its current weights (UsageError for a built-in model).
  void save_script(std::ostream& out) const;

  const std::string& name() const { return name_; }

 private:
  std::string name_;
  torch::nn::AnyModule native_;                 // a built-in model, else empty
  LayersFn layers_;                             // a built-in model's layers, if it has them
  std::shared_ptr<torch::jit::Module> script_;  // a TorchScript model, else null
  std::shared_ptr<TensorFn> forward_ = std::make_shared<TensorFn>();  // run_forward_with()
};

/// The names make_model accepts, in the order error messages list them.
const std::vector<std::string>& model_names();

/// Builds the named model with torch's default generator, so `torch::manual_seed(s)` before
/// the call makes the weights reproducible; "torchscript" loads options.path (its weights are
/// those in the file). Throws ConfigError for an unknown name or an option the model cannot
/// use, DataError for a TorchScript file that is missing or unreadable (the message says which).
/// mlp and lenet5 tell `built` about each layer as soon as it is made (layers.h); the other
/// models are made whole and never call it (resnet20 draws its convolutions' weights again
/// once all are made; a TorchScript file is loaded at once).
Model make_model(const ModelOptions& options, const LayerBuilt& built = {});

}  // namespace distml::nn
