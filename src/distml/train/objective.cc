#include "distml/train/objective.h"

#include <cmath>

#include "distml/core/error.h"
#include "distml/train/autocast_scope.h"

namespace distml::train {

nlohmann::json test_metrics(const EvalMetrics& m, const std::string& loss, TaskKind kind) {
  nlohmann::json j = {{"test_loss", m.loss}};
  if (loss == "cross_entropy" || loss == "bce_with_logits") j["test_accuracy"] = m.accuracy;
  if (loss == "mse") {
    j["test_mse"] = m.mse;
    j["test_r2"] = m.r2;
  }
  if (kind == TaskKind::language_model) j["test_perplexity"] = m.perplexity;
  return j;
}

nlohmann::json Objective::test_metrics(const EvalMetrics& m) const {
  return train::test_metrics(m, loss_, kind_);
}

namespace {

namespace F = torch::nn::functional;

std::vector<std::int64_t> as_shape(const std::vector<std::size_t>& dims) {
  return {dims.begin(), dims.end()};
}

std::string shape_text(const std::vector<std::int64_t>& dims) {
  std::string s = "[";
  for (std::size_t i = 0; i < dims.size(); ++i) s += cat(i ? ", " : "", dims[i]);
  return s + "]";
}

// Slots of the evaluation sums (after them: per-output sums of y, then of y^2, for mse).
enum Sum { kLoss, kCorrect, kCount, kElements, kSquaredError, kFixedSums };

}  // namespace

Rows rows_of(const data::Dataset& d, std::size_t begin, std::int64_t count) {
  Rows r{.features = d.row(begin), .count = count};
  if (d.has_float_targets())
    r.targets = d.targets.data() + begin * d.target_dim;
  else
    r.labels = d.labels.data() + begin;
  return r;
}

Rows rows_of(const data::Batch& b, std::size_t begin, std::int64_t count) {
  Rows r{.features = b.features.data() + begin * b.feature_dim, .count = count};
  if (b.targets.empty())
    r.labels = b.labels.data() + begin;
  else
    r.targets = b.targets.data() + begin * (b.targets.size() / b.size);
  return r;
}

Objective::Objective(const TrainConfig& config, const TaskData& data, const nn::Model& model)
    : loss_(config.train.loss),
      source_(config.origin("train.loss")),
      kind_(data.kind),
      dtype_(config.train.dtype == "float64" ? torch::kFloat64 : torch::kFloat32),
      bf16_(config.train.precision == "bf16"),
      precision_source_(config.origin("train.precision")),
      sample_shape_(as_shape(data.train.sample_shape)),
      target_shape_(as_shape(data.train.target_shape)),
      feature_dim_(static_cast<std::int64_t>(data.train.feature_dim)),
      target_dim_(static_cast<std::int64_t>(data.train.target_dim)),
      float_targets_(data.train.has_float_targets()),
      script_(model.is_script()),
      data_source_(config.data.path.empty() ? cat("data.dataset = \"", config.data.dataset, "\"")
                                            : config.data.path),
      classes_source_(script_ ? cat("the TorchScript model ", config.model.path)
                      : config.model.name == "mlp"
                          ? std::string("model.layers' last width")
                          : cat("model.name = \"", config.model.name, "\"")),
      fit_context_(cat("data.dataset = \"", config.data.dataset, "\" gives samples of shape ",
                       shape_text(sample_shape_), " that model.name = \"", config.model.name, "\"",
                       script_ ? cat(" (model.path = ", config.model.path, ")") : "",
                       " cannot take: ")) {
  if (loss_ == "cross_entropy" && float_targets_)
    throw ConfigError(cat(source_,
                          ": train.loss = \"cross_entropy\" needs class ids, but the "
                          "data's targets are floats; use \"mse\" or \"bce_with_logits\""));
  if (loss_ != "cross_entropy" && kind_ == TaskKind::language_model)
    throw ConfigError(cat(source_,
                          ": data.dataset = \"text\" trains a language model with "
                          "train.loss = \"cross_entropy\", not \"",
                          loss_, "\""));
  if (loss_ == "model" && !model.takes_target())
    throw ConfigError(cat(source_, ": train.loss = \"model\" needs a TorchScript model whose ",
                          "forward(x, y) returns the loss; model.name = \"", model.name(),
                          "\" has forward(x)"));
  if (loss_ != "model" && model.takes_target())
    throw ConfigError(cat(source_, ": the TorchScript model's forward takes (x, y) and returns ",
                          "a loss: set train.loss = \"model\""));
}

torch::Tensor Objective::input(const Rows& rows) const {
  auto x = torch::from_blob(const_cast<float*>(rows.features), {rows.count, feature_dim_},
                            torch::kFloat32);
  if (kind_ == TaskKind::language_model) return x;
  if (script_) {  // the user's model sees each sample in its stored shape
    std::vector<std::int64_t> shape = {rows.count};
    shape.insert(shape.end(), sample_shape_.begin(), sample_shape_.end());
    x = x.reshape(shape);
  }
  return x.to(dtype_);
}

torch::Tensor Objective::target(const Rows& rows) const {
  if (!float_targets_) {
    auto ids =
        torch::from_blob(const_cast<std::int64_t*>(rows.labels), {rows.count}, torch::kInt64);
    return loss_ == "mse" || loss_ == "bce_with_logits" ? ids.to(dtype_) : ids;
  }
  std::vector<std::int64_t> shape = {rows.count};
  shape.insert(shape.end(), target_shape_.begin(), target_shape_.end());
  return torch::from_blob(const_cast<float*>(rows.targets), shape, torch::kFloat32).to(dtype_);
}

torch::Tensor Objective::model_input(const Rows& rows) const {
  if (kind_ != TaskKind::language_model) return input(rows);
  return input(rows).to(torch::kInt64).narrow(1, 0, feature_dim_ - 1);  // predicts the rest
}

torch::Tensor Objective::predict(nn::Model& model, const Rows& rows) const {
  return in_precision(bf16_, [&] { return model.forward(model_input(rows)); });
}

Objective::Output Objective::evaluate(nn::Model& model, const Rows& rows, bool mean) const {
  if (loss_ != "model") return score(predict(model, rows), rows, mean);
  Output out;
  out.target = target(rows);
  out.loss = in_precision(bf16_, [&] { return model.forward_loss(input(rows), out.target); });
  if (out.loss.numel() != 1)
    throw DataError(cat("the TorchScript model's forward(x, y) returned a tensor of shape ",
                        shape_text(out.loss.sizes().vec()), "; it must return a scalar loss"));
  if (!mean) out.loss = out.loss.reshape({}) * static_cast<double>(rows.count);
  return out;
}

Objective::Output Objective::score(const torch::Tensor& prediction, const Rows& rows,
                                   bool mean) const {
  const auto reduction = mean ? torch::Reduction::Mean : torch::Reduction::Sum;
  Output out;
  if (kind_ == TaskKind::language_model) {
    out.target = input(rows).to(torch::kInt64).narrow(1, 1, feature_dim_ - 1).reshape(-1);
    out.prediction = prediction.reshape({out.target.size(0), -1});
    out.loss = torch::cross_entropy_loss(out.prediction, out.target, {}, reduction);
    return out;
  }
  out.target = target(rows);
  out.prediction = prediction;
  if (loss_ == "cross_entropy") {
    out.prediction = out.prediction.reshape({rows.count, -1});
    out.loss = torch::cross_entropy_loss(out.prediction, out.target, {}, reduction);
    return out;
  }
  if (out.prediction.numel() != out.target.numel())
    throw DataError(cat("train.loss = \"", loss_, "\": the model's output of shape ",
                        shape_text(out.prediction.sizes().vec()),
                        " does not match the targets of shape ",
                        shape_text(out.target.sizes().vec())));
  out.prediction = out.prediction.reshape(out.target.sizes());
  out.loss = loss_ == "mse" ? torch::mse_loss(out.prediction, out.target, reduction)
                            : torch::binary_cross_entropy_with_logits(out.prediction, out.target,
                                                                      {}, {}, reduction);
  return out;
}

torch::Tensor Objective::mean_loss_of(const torch::Tensor& prediction, const Rows& rows) const {
  return score(prediction, rows, true).loss;
}

torch::Tensor Objective::mean_loss(nn::Model& model, const Rows& rows) const {
  return evaluate(model, rows, true).loss;
}

std::vector<double> Objective::empty_sums() const {
  return std::vector<double>(
      kFixedSums + (loss_ == "mse" ? 2 * std::max<std::int64_t>(target_dim_, 1) : 0), 0.0);
}

void Objective::add_to(std::vector<double>& sums, nn::Model& model, const Rows& rows) const {
  torch::NoGradGuard no_grad;
  add_output(sums, evaluate(model, rows, false), rows);
}

void Objective::add_prediction_to(std::vector<double>& sums, const torch::Tensor& prediction,
                                  const Rows& rows) const {
  torch::NoGradGuard no_grad;
  add_output(sums, score(prediction, rows, false), rows);
}

void Objective::add_output(std::vector<double>& sums, const Output& out, const Rows& rows) const {
  sums[kLoss] += out.loss.item<double>();
  sums[kCount] += kind_ == TaskKind::language_model ? out.target.size(0) : rows.count;
  sums[kElements] += out.target.numel();
  if (loss_ == "cross_entropy")
    sums[kCorrect] += out.prediction.argmax(1).eq(out.target).sum().item<double>();
  if (loss_ == "bce_with_logits")
    sums[kCorrect] += out.prediction.gt(0).eq(out.target.gt(0.5)).sum().item<double>();
  if (loss_ == "mse") {
    sums[kSquaredError] += (out.prediction - out.target).square().sum().item<double>();
    const auto y = out.target.reshape({rows.count, -1}).to(torch::kFloat64);
    const auto k = y.size(1);
    const auto sum = y.sum(0), sum_sq = y.square().sum(0);
    for (std::int64_t j = 0; j < k; ++j) {
      sums[kFixedSums + j] += sum[j].item<double>();
      sums[kFixedSums + k + j] += sum_sq[j].item<double>();
    }
  }
}

EvalMetrics Objective::metrics(const std::vector<double>& sums) const {
  EvalMetrics m;
  m.count = static_cast<std::int64_t>(sums[kCount]);
  if (m.count == 0) return m;
  const bool per_element = loss_ == "mse" || loss_ == "bce_with_logits";
  m.loss = sums[kLoss] / (per_element ? sums[kElements] : sums[kCount]);
  if (loss_ == "cross_entropy") m.accuracy = sums[kCorrect] / sums[kCount];
  if (loss_ == "bce_with_logits") m.accuracy = sums[kCorrect] / sums[kElements];
  if (kind_ == TaskKind::language_model) m.perplexity = std::exp(m.loss);
  if (loss_ == "mse") {
    m.mse = sums[kSquaredError] / sums[kElements];
    const std::size_t k = (sums.size() - kFixedSums) / 2;
    double total = 0;  // SST: squares around each output's mean
    for (std::size_t j = 0; j < k; ++j)
      total += sums[kFixedSums + k + j] - sums[kFixedSums + j] * sums[kFixedSums + j] / m.count;
    m.r2 = total > 0 ? 1 - sums[kSquaredError] / total : 0;
  }
  return m;
}

void Objective::check_labels(const data::Dataset& train, std::int64_t classes) const {
  for (std::size_t i = 0; i < train.labels.size(); ++i) {
    const std::int64_t label = train.labels[i];
    if (label >= 0 && label < classes) continue;
    throw DataError(cat(data_source_, ": training sample ", i, " has label ", label,
                        ", but the model gives ", classes, " classes (ids 0..", classes - 1, "); ",
                        classes_source_, " must give one output per class"));
  }
}

void Objective::check_fits(nn::Model& model, const data::Dataset& train) const {
  const auto n = std::min<std::int64_t>(2, static_cast<std::int64_t>(train.num_samples));
  if (n == 0) return;
  torch::NoGradGuard no_grad;
  model.train(false);  // no BatchNorm statistics move
  try {
    const Rows rows = rows_of(train, 0, n);
    if (loss_ == "model") {
      evaluate(model, rows, true);
    } else {  // evaluate()'s way, with the prediction's width in hand
      const auto prediction = predict(model, rows);
      // Class ids the model has no output for: named here, not by LibTorch's "Target 4 is out
      // of bounds" at the first batch that holds one.
      if (loss_ == "cross_entropy" && kind_ == TaskKind::classify)
        check_labels(train, prediction.size(-1));
      score(prediction, rows, true);
    }
  } catch (const DataError&) {
    model.train(true);
    throw;
  } catch (const std::exception& e) {
    model.train(true);
    // The TorchScript interpreter puts its own words and a traceback before the cause.
    std::string why = e.what();
    if (const auto at = why.rfind("RuntimeError: "); at != std::string::npos)
      why = why.substr(at + 14);
    why = why.substr(0, why.find('\n'));
    if (bf16_ && forward_runs_in_fp32(model, rows_of(train, 0, n)))
      throw ConfigError(cat(precision_source_,
                            ": train.precision = \"bf16\": the model's forward runs in float32 "
                            "but not in bfloat16 on this CPU (",
                            why, "); set train.precision = \"fp32\""));
    throw ConfigError(cat(source_, ": ", fit_context_, why));
  }
  model.train(true);
}

bool Objective::forward_runs_in_fp32(nn::Model& model, const Rows& rows) const {
  try {
    if (loss_ == "model")
      model.forward_loss(input(rows), target(rows));
    else
      model.forward(model_input(rows));
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

}  // namespace distml::train
