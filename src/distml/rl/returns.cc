#include "distml/rl/returns.h"

#include <limits>

#include "distml/core/error.h"

namespace distml::rl {
namespace {

// Throws unless `t` is [T, B] like `reference` (named `reference_name`).
void check_same_shape(const char* fn, const char* name, const torch::Tensor& t,
                      const char* reference_name, const torch::Tensor& reference) {
  if (t.sizes() != reference.sizes()) {
    throw Error(cat(fn, ": ", name, " has shape ", t.sizes(), " but ", reference_name,
                    " has shape ", reference.sizes(), "; both must be [T, B]"));
  }
}

// Throws unless `reference` is [T, B] and `bootstrap` is [B].
void check_time_major(const char* fn, const char* name, const torch::Tensor& reference,
                      const torch::Tensor& bootstrap) {
  if (reference.dim() != 2) {
    throw Error(cat(fn, ": ", name, " must be [T, B], got shape ", reference.sizes()));
  }
  if (bootstrap.dim() != 1 || bootstrap.size(0) != reference.size(1)) {
    throw Error(cat(fn, ": bootstrap_value must be [B] = [", reference.size(1), "], got shape ",
                    bootstrap.sizes()));
  }
}

}  // namespace

Advantages gae(const torch::Tensor& rewards, const torch::Tensor& values,
               const torch::Tensor& bootstrap_value, const torch::Tensor& discounts,
               double lambda) {
  torch::NoGradGuard no_grad;
  check_time_major("gae", "rewards", rewards, bootstrap_value);
  check_same_shape("gae", "values", values, "rewards", rewards);
  check_same_shape("gae", "discounts", discounts, "rewards", rewards);
  const int64_t steps = rewards.size(0);
  auto advantages = torch::empty_like(rewards);
  auto next_value = bootstrap_value;
  auto next_advantage = torch::zeros_like(bootstrap_value);
  for (int64_t t = steps - 1; t >= 0; --t) {
    const auto delta = rewards[t] + discounts[t] * next_value - values[t];
    next_advantage = delta + discounts[t] * lambda * next_advantage;
    advantages[t].copy_(next_advantage);
    next_value = values[t];
  }
  return {advantages, advantages + values};
}

VTraceTargets vtrace(const torch::Tensor& log_rhos, const torch::Tensor& discounts,
                     const torch::Tensor& rewards, const torch::Tensor& values,
                     const torch::Tensor& bootstrap_value, double clip_rho_threshold,
                     double clip_c_threshold, double clip_pg_rho_threshold) {
  torch::NoGradGuard no_grad;
  check_time_major("vtrace", "log_rhos", log_rhos, bootstrap_value);
  check_same_shape("vtrace", "discounts", discounts, "log_rhos", log_rhos);
  check_same_shape("vtrace", "rewards", rewards, "log_rhos", log_rhos);
  check_same_shape("vtrace", "values", values, "log_rhos", log_rhos);
  const auto rhos = torch::exp(log_rhos);
  const auto clipped_rhos = torch::clamp_max(rhos, clip_rho_threshold);
  const auto cs = torch::clamp_max(rhos, clip_c_threshold);
  const auto values_t_plus_1 = torch::cat({values.slice(0, 1), bootstrap_value.unsqueeze(0)}, 0);
  const auto deltas = clipped_rhos * (rewards + discounts * values_t_plus_1 - values);

  const int64_t steps = log_rhos.size(0);
  auto vs_minus_v = torch::empty_like(values);
  auto acc = torch::zeros_like(bootstrap_value);
  for (int64_t t = steps - 1; t >= 0; --t) {
    acc = deltas[t] + discounts[t] * cs[t] * acc;
    vs_minus_v[t].copy_(acc);
  }
  auto vs = vs_minus_v + values;
  const auto vs_t_plus_1 = torch::cat({vs.slice(0, 1), bootstrap_value.unsqueeze(0)}, 0);
  const auto clipped_pg_rhos = torch::clamp_max(rhos, clip_pg_rho_threshold);
  auto pg_advantages = clipped_pg_rhos * (rewards + discounts * vs_t_plus_1 - values);
  return {vs, pg_advantages};
}

}  // namespace distml::rl
