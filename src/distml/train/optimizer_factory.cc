#include "distml/train/optimizer_factory.h"

#include <cmath>
#include <numbers>

#include "distml/core/error.h"

namespace distml::train {

std::unique_ptr<torch::optim::Optimizer> make_optimizer(std::vector<torch::Tensor> params,
                                                        const OptimizerOptions& o) {
  if (!(o.lr > 0)) throw ConfigError(cat("optim.lr must be positive, got ", o.lr));
  if (o.weight_decay < 0)
    throw ConfigError(cat("optim.weight_decay must be >= 0, got ", o.weight_decay));
  if (o.name == "sgd") {
    if (o.nesterov && !(o.momentum > 0))
      throw ConfigError("optim.nesterov needs optim.momentum > 0");
    return std::make_unique<torch::optim::SGD>(std::move(params),
                                               torch::optim::SGDOptions(o.lr)
                                                   .momentum(o.momentum)
                                                   .nesterov(o.nesterov)
                                                   .weight_decay(o.weight_decay));
  }
  if (o.name == "adam")
    return std::make_unique<torch::optim::Adam>(std::move(params),
                                                torch::optim::AdamOptions(o.lr)
                                                    .betas({o.beta1, o.beta2})
                                                    .eps(o.eps)
                                                    .weight_decay(o.weight_decay));
  if (o.name == "adamw")
    return std::make_unique<torch::optim::AdamW>(std::move(params),
                                                 torch::optim::AdamWOptions(o.lr)
                                                     .betas({o.beta1, o.beta2})
                                                     .eps(o.eps)
                                                     .weight_decay(o.weight_decay));
  throw ConfigError(cat("unknown optimizer '", o.name, "' (valid: sgd, adam, adamw)"));
}

double scheduled_lr(const ScheduleOptions& s, double lr, std::int64_t step) {
  if (s.warmup_steps < 0) throw ConfigError("schedule warmup_steps must be >= 0");
  if (step < s.warmup_steps) return lr * static_cast<double>(step + 1) / s.warmup_steps;
  const std::int64_t t = step - s.warmup_steps;  // steps since the warm-up ended
  if (s.name == "constant") return lr;
  if (s.name == "step") {
    if (s.step_size < 1)
      throw ConfigError(cat("schedule step_size must be >= 1, got ", s.step_size));
    return lr * std::pow(s.gamma, static_cast<double>(t / s.step_size));
  }
  if (s.name == "cosine") {
    const std::int64_t span = s.total_steps - s.warmup_steps;
    if (span < 1)
      throw ConfigError(cat("cosine schedule needs total_steps (", s.total_steps,
                            ") greater than warmup_steps (", s.warmup_steps, ")"));
    const double progress = std::min(1.0, static_cast<double>(t) / span);
    return s.min_lr + 0.5 * (lr - s.min_lr) * (1 + std::cos(std::numbers::pi * progress));
  }
  throw ConfigError(cat("unknown schedule '", s.name, "' (valid: constant, step, cosine)"));
}

void set_lr(torch::optim::Optimizer& optimizer, double lr) {
  for (auto& group : optimizer.param_groups()) group.options().set_lr(lr);
}

std::vector<torch::Tensor> sgd_velocity(torch::optim::Optimizer& optimizer,
                                        const std::vector<torch::Tensor>& params) {
  const double lr = optimizer.param_groups().front().options().get_lr();
  auto& state = optimizer.state();
  std::vector<torch::Tensor> out;
  for (const auto& p : params) {
    const auto it = state.find(c10::guts::to_string(p.unsafeGetTensorImpl()));
    const auto* sgd = it == state.end()
                          ? nullptr
                          : dynamic_cast<const torch::optim::SGDParamState*>(it->second.get());
    out.push_back(sgd && sgd->momentum_buffer().defined() ? lr * sgd->momentum_buffer()
                                                          : torch::zeros_like(p));
  }
  return out;
}

}  // namespace distml::train
