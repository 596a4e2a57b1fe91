#include "distml/nn/model_registry.h"

#include <utility>

#include "distml/core/error.h"
#include "distml/nn/char_lstm.h"
#include "distml/nn/lenet5.h"
#include "distml/nn/mlp.h"
#include "distml/nn/resnet20.h"

namespace distml::nn {

Model::Model(std::string name, torch::nn::AnyModule module)
    : name_(std::move(name)), module_(std::move(module)) {}

const std::vector<std::string>& model_names() {
  static const std::vector<std::string> names = {"mlp", "lenet5", "resnet20", "char_lstm"};
  return names;
}

Model make_model(const ModelOptions& options) {
  const std::string& name = options.name;
  if (name == "mlp") return Model(name, torch::nn::AnyModule(Mlp(options.mlp_layers)));
  if (name == "lenet5") {
    return Model(name, torch::nn::AnyModule(
                           LeNet5(options.in_channels, options.image_size, options.num_classes)));
  }
  if (name == "resnet20") {
    return Model(name, torch::nn::AnyModule(
                           ResNet20(options.in_channels, options.image_size, options.num_classes)));
  }
  if (name == "char_lstm") {
    return Model(name, torch::nn::AnyModule(CharLstm(options.vocab_size, options.embedding_dim,
                                                     options.hidden_size, options.lstm_layers)));
  }
  std::string valid;
  for (const std::string& n : model_names()) valid += (valid.empty() ? "" : ", ") + n;
  throw ConfigError(cat("unknown model '", name, "'; valid models: ", valid));
}

}  // namespace distml::nn
