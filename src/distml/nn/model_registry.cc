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

// The weights of the scripted torch.nn.Embedding and EmbeddingBag built with sparse=True (a
// constant of theirs), as tensors_of finds them in built-in modules.
std::vector<std::string> sparse_embeddings(const torch::jit::Module& module) {
  std::vector<std::string> names;
  for (const auto& m : module.named_modules()) {
    const auto type = m.value.type();
    const std::string kind = type->name() ? type->name()->name() : "";
    const auto sparse = type->findConstant("sparse");
    if ((kind == "Embedding" || kind == "EmbeddingBag") && sparse && sparse->isBool() &&
        sparse->toBool())
      names.push_back(m.name.empty() ? "weight" : m.name + ".weight");
  }
  return names;
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
  } catch (const c10::Error& e) {
    // A zip archive without TorchScript's constants: what torch.save writes (a pickled module
    // or a state_dict), the usual first mistake.
    const std::string why = e.what_without_backtrace();
    if (why.find("constants.pkl") != std::string::npos)
      throw DataError(cat(path,
                          ": written by torch.save (a pickled module or a state_dict), not "
                          "TorchScript; distml runs a scripted module: in Python, "
                          "torch.jit.script(model).save(\"",
                          std::filesystem::path(path).filename().string(), "\")"));
    throw DataError(cat(path, ": not a TorchScript module that torch.jit.load reads: ",
                        why.substr(0, why.find('\n'))));
  } catch (const std::exception& e) {
    const std::string why = e.what();
    throw DataError(cat(path, ": not a TorchScript module that torch.jit.load reads: ",
                        why.substr(0, why.find('\n'))));
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
  if (*forward_) return (*forward_)(input);
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
  t.sparse_names = sparse_embeddings(*script_);
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

namespace {

// The TorchScript module's tensors that no top-level child holds, as "name" list.
std::string tensors_outside_children(const torch::jit::Module& module) {
  std::vector<std::string> children;
  for (const auto& child : module.named_children()) children.push_back(child.name + ".");
  std::string outside;
  auto check = [&](const std::string& name) {
    for (const auto& prefix : children)
      if (name.compare(0, prefix.size(), prefix) == 0) return;
    outside += cat(outside.empty() ? "'" : ", '", name, "'");
  };
  for (const auto& p : module.named_parameters()) check(p.name);
  for (const auto& b : module.named_buffers()) check(b.name);
  return outside;
}

// The children applied in order, and forward, on a float64 copy in evaluation mode (no dropout,
// BatchNorm by its running statistics): the same inputs for both, and no state moves.
std::string chain_differs_from_forward(const torch::jit::Module& module, torch::Tensor probe) {
  auto copy = module.clone();
  copy.to(torch::kFloat64);
  copy.eval();
  if (probe.is_floating_point()) probe = probe.to(torch::kFloat64);
  torch::NoGradGuard no_grad;
  const auto whole = copy.forward({probe}).toTensor();
  torch::Tensor chained = probe;
  try {
    for (auto child : copy.named_children()) chained = child.value.forward({chained}).toTensor();
  } catch (const std::exception& e) {
    std::string why = e.what();
    if (const auto at = why.rfind("RuntimeError: "); at != std::string::npos)
      why = why.substr(at + 14);
    return cat("applying its children in order fails: ", why.substr(0, why.find('\n')));
  }
  if (chained.sizes() != whole.sizes())
    return cat("its children in order give a result of shape ", chained.sizes(),
               " where forward gives ", whole.sizes());
  // The same operations on the same float64 values: only a regrouped sum could differ, by at
  // most n u of the magnitudes summed (Higham 4.2; u = 2^-53, n < 1e6 terms per output over
  // the whole network), under 1e-10 of them. An operation that forward adds between children
  // (an activation, a scale) changes the result by a share of its size, far above 1e-8 of it.
  const double scale = std::max(whole.abs().max().item<double>(), 1e-300);
  const double apart = (chained - whole).abs().max().item<double>();
  if (apart > 1e-8 * scale)
    return cat("its children in order give another result than forward (largest difference ", apart,
               ", largest output ", scale, ")");
  return "";
}

}  // namespace

void Model::check_layers_are_forward(const torch::Tensor& probe) const {
  if (!script_) return;
  const char* fix =
      ": pipeline stages and ZeRO stage 3 run the module's top-level children in order, so "
      "forward must do "
      "nothing else (an nn.Sequential; write activations and reshapes as child modules, such as "
      "nn.ReLU() and nn.Flatten())";
  if (const auto outside = tensors_outside_children(*script_); !outside.empty())
    throw ConfigError(cat("the TorchScript model cannot be run layer by layer: ", outside,
                          " belong", outside.find(',') == std::string::npos ? "s" : "",
                          " to no child module, so no layer would train ",
                          outside.find(',') == std::string::npos ? "it" : "them", fix));
  if (const auto why = chain_differs_from_forward(*script_, probe); !why.empty())
    throw ConfigError(cat("the TorchScript model cannot be run layer by layer: ", why, fix));
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

Model make_model(const ModelOptions& options, const LayerBuilt& built) {
  const std::string& name = options.name;
  if (name == "mlp") return layered(name, Mlp(options.mlp_layers, built));
  if (name == "lenet5")
    return layered(name,
                   LeNet5(options.in_channels, options.image_size, options.num_classes, built));
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
