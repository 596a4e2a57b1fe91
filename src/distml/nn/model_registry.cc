#include "distml/nn/model_registry.h"

#include <torch/script.h>

#include <filesystem>
#include <utility>

#include "distml/core/error.h"
#include "distml/nn/char_lstm.h"
#include "distml/nn/fasttext.h"
#include "distml/nn/lenet5.h"
#include "distml/nn/mlp.h"
#include "distml/nn/resnet20.h"

namespace distml::nn {
namespace {

template <class Slots>
torch::OrderedDict<std::string, torch::Tensor> ordered(const Slots& slots) {
  torch::OrderedDict<std::string, torch::Tensor> out;
  for (const auto& slot : slots) out.insert(slot.name, slot.value);
  return out;
}

// The user's module, with a forward that distml can call.
Model load_torchscript(const std::string& path) {
  if (path.empty())
    throw ConfigError("model.path must name the TorchScript file for model.name = \"torchscript\"");
  if (!std::filesystem::exists(path))
    throw DataError(cat(path, ": no such TorchScript file (model.path)"));
  torch::jit::Module module;
  try {
    module = torch::jit::load(path);
  } catch (const std::exception& e) {
    throw DataError(cat(path, ": not a TorchScript module that torch.jit.load reads: ",
                        std::string(e.what()).substr(0, 400)));
  }
  const auto method = module.find_method("forward");
  if (!method) throw DataError(cat(path, ": the TorchScript module has no forward method"));
  const auto inputs = method->function().getSchema().arguments().size() - 1;  // minus self
  if (inputs != 1 && inputs != 2)
    throw DataError(cat(path, ": forward takes ", inputs,
                        " inputs; distml calls forward(x) or forward(x, y) -> loss"));
  return Model("torchscript", module);
}

// A built-in model that lists its layers.
template <class Holder>
Model layered(const std::string& name, Holder module) {
  return Model(name, torch::nn::AnyModule(module),
               [impl = module.ptr()] { return impl->layers(); });
}

}  // namespace

Model::Model(std::string name, torch::nn::AnyModule module, LayersFn layers)
    : name_(std::move(name)), native_(std::move(module)), layers_(std::move(layers)) {}

Model::Model(std::string name, const torch::jit::Module& module)
    : name_(std::move(name)), script_(std::make_shared<torch::jit::Module>(module)) {}

Model::~Model() = default;
Model::Model(const Model&) = default;
Model& Model::operator=(const Model&) = default;

torch::Tensor Model::forward(const torch::Tensor& input) {
  if (!script_) return native_.forward(input);
  if (takes_target())
    throw UsageError(
        "this TorchScript model's forward takes (x, y) and returns a loss: "
        "train it with train.loss = \"model\"");
  return script_->forward({input}).toTensor();
}

torch::Tensor Model::forward_loss(const torch::Tensor& input, const torch::Tensor& target) {
  if (!takes_target())
    throw UsageError(cat("train.loss = \"model\" needs a TorchScript model whose forward takes ",
                         "(x, y) and returns the loss; model '", name_, "' takes (x)"));
  return script_->forward({input, target}).toTensor();
}

bool Model::takes_target() const {
  return script_ && script_->get_method("forward").function().getSchema().arguments().size() == 3;
}

std::vector<torch::Tensor> Model::parameters() const {
  if (!script_) return native_.ptr()->parameters();
  std::vector<torch::Tensor> out;
  for (const auto& p : script_->parameters()) out.push_back(p);
  return out;
}

torch::OrderedDict<std::string, torch::Tensor> Model::named_parameters() const {
  return script_ ? ordered(script_->named_parameters()) : native_.ptr()->named_parameters();
}

torch::OrderedDict<std::string, torch::Tensor> Model::named_buffers() const {
  return script_ ? ordered(script_->named_buffers()) : native_.ptr()->named_buffers();
}

ModelTensors Model::tensors() const {
  if (!script_) return tensors_of(*native_.ptr());
  ModelTensors t;
  for (const auto& p : named_parameters()) {
    t.parameter_names.push_back(p.key());
    t.parameters.push_back(p.value());
  }
  for (const auto& b : named_buffers()) {
    t.buffer_names.push_back(b.key());
    t.buffers.push_back(b.value());
  }
  return t;
}

void Model::train(bool on) {
  if (script_)
    script_->train(on);
  else
    native_.ptr()->train(on);
}

void Model::to(torch::ScalarType dtype) {
  if (script_)
    script_->to(dtype);
  else
    native_.ptr()->to(dtype);
}

std::vector<Layer> Model::layers() const {
  if (layers_) return layers_();
  if (!script_)
    throw ConfigError(cat("model '", name_, "' is not a sequence of layers and cannot be cut into ",
                          "pipeline stages"));
  std::vector<Layer> out;
  for (const auto& child : script_->named_children()) {
    auto forward = [module = child.value](const torch::Tensor& x) mutable {
      return module.forward({x}).toTensor();
    };
    out.push_back({child.name, {child.name}, forward});
  }
  if (out.empty())
    throw ConfigError(
        cat("the TorchScript model has no child modules to cut into pipeline stages: "
            "script an nn.Sequential"));
  return out;
}

void Model::save_script(std::ostream& out) const {
  if (!script_)
    throw UsageError(cat("model '", name_, "' is built in, not TorchScript: only a model.name = ",
                         "\"torchscript\" model can be exported as a module"));
  script_->save(out);
}

const std::vector<std::string>& model_names() {
  static const std::vector<std::string> names = {"mlp",       "lenet5",   "resnet20",
                                                 "char_lstm", "fasttext", "torchscript"};
  return names;
}

Model make_model(const ModelOptions& options) {
  const std::string& name = options.name;
  if (name == "mlp") return layered(name, Mlp(options.mlp_layers));
  if (name == "lenet5")
    return layered(name, LeNet5(options.in_channels, options.image_size, options.num_classes));
  if (name == "resnet20")
    return layered(name, ResNet20(options.in_channels, options.image_size, options.num_classes));
  if (name == "char_lstm") {
    return Model(name, torch::nn::AnyModule(CharLstm(options.vocab_size, options.embedding_dim,
                                                     options.hidden_size, options.lstm_layers)));
  }
  if (name == "fasttext")
    return Model(name, torch::nn::AnyModule(FastText(options.vocab_size, options.embedding_dim,
                                                     options.num_classes)));
  if (name == "torchscript") return load_torchscript(options.path);
  std::string valid;
  for (const std::string& n : model_names()) valid += (valid.empty() ? "" : ", ") + n;
  throw ConfigError(cat("unknown model '", name, "'; valid models: ", valid));
}

}  // namespace distml::nn
