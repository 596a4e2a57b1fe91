// The loss PPO and A2C minimise on a minibatch (Schulman et al. 2017, as CleanRL writes it):
//   policy  -mean(min(ratio A, clip(ratio, 1 - eps, 1 + eps) A)), ratio = pi(a|s) / pi_old(a|s)
//           (without clipping, eps = 0: -mean(ratio A), whose gradient at ratio 1 is A2C's);
//   value   0.5 mean((V - R)^2), or with algo.value_clip = c the larger of that and
//           (V_old + clip(V - V_old, -c, c) - R)^2 per sample;
//   total   policy + algo.value_coef value - algo.entropy entropy.
// The advantages A are normalised per minibatch when algo.normalize_advantages is on.
#pragma once

#include <torch/torch.h>

#include "distml/rl/policy.h"
#include "distml/rl/rl_config.h"

namespace distml::rl {

/// A rollout flattened to samples: what the behaviour policy saw, did and predicted, and the
/// targets computed from it.
struct PpoBatch {
  torch::Tensor observations, actions, log_probs, values, advantages, returns;
};

struct PpoLoss {
  torch::Tensor total;  // to back-propagate
  double policy, value, entropy;
  double clip_fraction;  // of the samples whose ratio is outside [1 - eps, 1 + eps]
  double approx_kl;      // KL(old || new) estimated as mean((ratio - 1) - log ratio)
};

/// The loss of the samples `indices` of `batch` under `net`'s current parameters.
PpoLoss ppo_loss(ActorCriticImpl& net, const PpoBatch& batch, const torch::Tensor& indices,
                 const AlgoConfig& algo);

}  // namespace distml::rl
