// What the trainer minimises and how it scores the test split: the loss `train.loss` names
// (cross_entropy, mse, bce_with_logits, or the model's own forward(x, y)), over class ids or
// float targets, and the test metric that fits it (accuracy; MSE and R^2 for regression).
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "distml/data/prefetch_loader.h"
#include "distml/nn/model_registry.h"
#include "distml/train/config.h"
#include "distml/train/task_data.h"

namespace distml::train {

/// Metrics of an evaluation pass over the test split, summed over every rank's shard.
struct EvalMetrics {
  double loss = 0;         // mean loss per sample (per character for a language model; per
                           // target element for mse and bce_with_logits)
  double accuracy = 0;     // fraction of correct predictions (cross_entropy, bce_with_logits)
  double perplexity = 0;   // exp(loss); language models only
  double mse = 0, r2 = 0;  // mse: mean squared error per target element, and R^2 (1 - SSE/SST,
                           // SST around each output's test mean: scikit-learn's r2_score for
                           // one output, its variance-weighted average for several)
  std::int64_t count = 0;  // test samples
};

/// Some consecutive rows of a dataset or batch: features, and class ids or float targets.
struct Rows {
  const float* features = nullptr;
  const std::int64_t* labels = nullptr;  // when the data has class ids
  const float* targets = nullptr;        // when it has float targets
  std::int64_t count = 0;
};

/// The test metrics that fit the task, as an event's fields: test_loss; test_accuracy for
/// classification (train.loss cross_entropy, bce_with_logits); test_mse and test_r2 for mse;
/// test_perplexity for a language model; the loss alone for a model's own loss ("model").
nlohmann::json test_metrics(const EvalMetrics& m, const std::string& loss, TaskKind kind);

/// The rows [begin, begin + count) of a dataset or batch.
Rows rows_of(const data::Dataset& d, std::size_t begin, std::int64_t count);
Rows rows_of(const data::Batch& b, std::size_t begin, std::int64_t count);

class Objective {
 public:
  /// ConfigError naming the keys when train.loss does not fit the data (cross_entropy on float
  /// targets, "model" with a model whose forward takes only x).
  Objective(const TrainConfig& config, const TaskData& data, const nn::Model& model);

  /// The mean loss of the rows, for training.
  torch::Tensor mean_loss(nn::Model& model, const Rows& rows) const;
  /// The same in two halves, for a pipeline whose first stage takes the input and whose last
  /// stage has the prediction (not for train.loss = "model"): what the model's forward takes
  /// for the rows, and the mean loss of its prediction for them.
  torch::Tensor model_input(const Rows& rows) const;
  torch::Tensor mean_loss_of(const torch::Tensor& prediction, const Rows& rows) const;

  /// Collective-ready sums of an evaluation: add each test chunk, all-reduce (sum) the
  /// vector, then read the metrics from it.
  std::vector<double> empty_sums() const;
  void add_to(std::vector<double>& sums, nn::Model& model, const Rows& rows) const;
  /// The same from the model's prediction for the rows (a pipeline's last stage).
  void add_prediction_to(std::vector<double>& sums, const torch::Tensor& prediction,
                         const Rows& rows) const;
  EvalMetrics metrics(const std::vector<double>& sums) const;
  /// test_metrics() for this objective's loss and task.
  nlohmann::json test_metrics(const EvalMetrics& m) const;

  /// Runs the model on two training rows, so that a data shape the model cannot take stops
  /// the run before training with a ConfigError naming both shapes and the keys behind them.
  void check_fits(nn::Model& model, const data::Dataset& train) const;

 private:
  struct Output {
    torch::Tensor loss;                // summed over the rows' samples or target elements
    torch::Tensor prediction, target;  // what the metrics compare
  };
  Output evaluate(nn::Model& model, const Rows& rows, bool mean) const;
  /// The model's prediction for the rows, its forward in train.precision (in_precision).
  torch::Tensor predict(nn::Model& model, const Rows& rows) const;
  /// Whether the model's forward on the rows runs without autocast (check_fits under bf16:
  /// whose failure it was).
  bool forward_runs_in_fp32(nn::Model& model, const Rows& rows) const;
  /// DataError naming the first training sample whose class id is not below `classes`.
  void check_labels(const data::Dataset& train, std::int64_t classes) const;
  Output score(const torch::Tensor& prediction, const Rows& rows, bool mean) const;
  void add_output(std::vector<double>& sums, const Output& out, const Rows& rows) const;
  torch::Tensor input(const Rows& rows) const;
  torch::Tensor target(const Rows& rows) const;

  std::string loss_, source_;
  TaskKind kind_;
  torch::ScalarType dtype_;
  bool bf16_;  // train.precision = "bf16": the forward under autocast
  std::string precision_source_;
  std::vector<std::int64_t> sample_shape_, target_shape_;
  std::int64_t feature_dim_, target_dim_;
  bool float_targets_, script_;
  std::string data_source_;     // the data file, for check_labels()' message
  std::string classes_source_;  // what sets the model's outputs, for the same
  std::string fit_context_;     // the start of check_fits()' message
};

}  // namespace distml::train
