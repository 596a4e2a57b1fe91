// Return and advantage targets of deep RL (GAE, V-trace) over time-major [T, B] tensors; the
// n-step returns of Ape-X are built transition by transition (nstep.h: NStepWindow).
// `discounts[t, b]` is gamma where step t did not end the episode and 0 where it did; a caller
// that wants to bootstrap a truncated episode folds gamma * V(final observation) into the reward.
#pragma once

#include <torch/torch.h>

namespace distml::rl {

struct Advantages {
  torch::Tensor advantages;  // [T, B]
  torch::Tensor returns;     // [T, B]: advantages + values, the value-function target
};

/// GAE(lambda) of Schulman et al. 2016; `bootstrap_value` [B] is V of the state after step T-1.
Advantages gae(const torch::Tensor& rewards, const torch::Tensor& values,
               const torch::Tensor& bootstrap_value, const torch::Tensor& discounts, double lambda);

struct VTraceTargets {
  torch::Tensor vs;             // [T, B]: the value-function targets v_s
  torch::Tensor pg_advantages;  // [T, B]: rho_s (r_s + discount_s v_{s+1} - V(x_s))
};

/// V-trace of Espeholt et al. 2018, as scalable_agent's `from_importance_weights`:
/// `log_rhos` = log pi(a|x) - log mu(a|x) of the behaviour actions. No gradient flows.
VTraceTargets vtrace(const torch::Tensor& log_rhos, const torch::Tensor& discounts,
                     const torch::Tensor& rewards, const torch::Tensor& values,
                     const torch::Tensor& bootstrap_value, double clip_rho_threshold = 1.0,
                     double clip_c_threshold = 1.0, double clip_pg_rho_threshold = 1.0);

}  // namespace distml::rl
