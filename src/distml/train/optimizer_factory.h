// Optimizers by name (sgd, adam, adamw) and learning-rate schedules (constant, step, cosine,
// each with optional linear warm-up), as config keys will name them.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <string>
#include <vector>

#include "distml/train/optimizer_options.h"

namespace distml::train {

/// Builds the optimizer; ConfigError naming the valid names or the bad value otherwise.
std::unique_ptr<torch::optim::Optimizer> make_optimizer(std::vector<torch::Tensor> params,
                                                        const OptimizerOptions& options);

struct ScheduleOptions {
  std::string name = "constant";  // constant | step | cosine
  std::int64_t warmup_steps = 0;  // linear from lr/warmup_steps up to lr
  std::int64_t step_size = 1000;  // step: multiply by gamma every step_size steps
  double gamma = 0.1;
  std::int64_t total_steps = 0;  // cosine: decays to min_lr at total_steps
  double min_lr = 0.0;
};

/// The learning rate of optimizer step `step` (0-based) for base rate `lr`. Throws
/// ConfigError for an unknown schedule or inconsistent values.
double scheduled_lr(const ScheduleOptions& schedule, double lr, std::int64_t step);

/// Sets every parameter group's learning rate.
void set_lr(torch::optim::Optimizer& optimizer, double lr);

/// Momentum SGD's step per update for each of `params`: lr x its momentum buffer (zeros
/// before the first update), what SpecTrain extrapolates the weights with.
std::vector<torch::Tensor> sgd_velocity(torch::optim::Optimizer& optimizer,
                                        const std::vector<torch::Tensor>& params);

/// The linear scaling rule (Goyal et al. 2017): the base rate times the world size.
inline double linearly_scaled_lr(double lr, int world_size) { return lr * world_size; }

}  // namespace distml::train
