#include "distml/train/model_setup.h"

#include <optional>

#include "distml/core/error.h"
#include "distml/train/generator_state.h"

namespace distml::train {
namespace {

// Model options completed from the data: classes, input shape, vocabulary.
nn::ModelOptions model_options(const TrainConfig& config, const TaskData& data) {
  nn::ModelOptions m = config.model;
  if (data.kind == TaskKind::language_model) {
    m.vocab_size = data.num_classes;
    return m;
  }
  // What the model outputs: a logit per class, or one value per float target (one for mse or
  // bce_with_logits over class ids).
  const bool per_class = config.train.loss == "cross_entropy";
  const auto outputs =
      per_class ? data.num_classes
                : std::max<std::int64_t>(1, static_cast<std::int64_t>(data.train.target_dim));
  m.num_classes = outputs;
  const auto& shape = data.train.sample_shape;
  if (shape.size() == 2) {
    m.in_channels = 1;
    m.image_size = static_cast<std::int64_t>(shape[0]);
  } else if (shape.size() == 3) {
    m.in_channels = static_cast<std::int64_t>(shape[0]);
    m.image_size = static_cast<std::int64_t>(shape[1]);
  }
  if (m.name == "mlp") {
    const auto features = static_cast<std::int64_t>(data.train.feature_dim);
    if (m.mlp_layers.front() != features || m.mlp_layers.back() != outputs)
      throw ConfigError(cat(config.origin("model.layers"), ": model.layers must start with the ",
                            features, " input features and end with the ", outputs,
                            per_class ? " classes of the data" : " outputs train.loss compares",
                            ", got ", m.mlp_layers.front(), " ... ", m.mlp_layers.back()));
  }
  return m;
}

torch::ScalarType scalar_type(const std::string& dtype) {
  return dtype == "float64" ? torch::kFloat64 : torch::kFloat32;
}

// torch's default generator is process-wide: ranks that are threads of one process must not
// draw from it at the same time, or their initial weights would depend on the interleaving
// (draw_seeded). The weights are drawn in float32 and then converted, so both dtypes start from
// one model. `built` must not communicate: other ranks may wait for the lock.
nn::Model seeded_model(const nn::ModelOptions& options, std::uint64_t seed, torch::ScalarType dtype,
                       const nn::LayerBuilt& built) {
  nn::LayerBuilt converted;
  if (built)
    converted = [&](const nn::ModelTensors& layer) {
      torch::NoGradGuard no_grad;
      for (auto p : layer.parameters) p.set_data(p.to(dtype));
      built(layer);
    };
  std::optional<nn::Model> model;
  draw_seeded(seed, [&] { model = nn::make_model(options, converted); });
  model->to(dtype);  // the rest: buffers, and every tensor of a model that tells no one
  return *model;
}

}  // namespace

nn::Model build_model(const TrainConfig& config, const TaskData& data,
                      const nn::LayerBuilt& built) {
  return seeded_model(model_options(config, data), config.train.seed,
                      scalar_type(config.train.dtype), built);
}

}  // namespace distml::train
