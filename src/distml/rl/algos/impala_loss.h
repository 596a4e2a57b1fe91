// The loss IMPALA's learner minimises on a batch of unrolls (Espeholt et al. 2018, eq. 1 and 4):
//   policy    -mean(log pi(a_s|x_s) rho~_s (r_s + discount_s v_{s+1} - V(x_s)))
//   baseline  0.5 mean((v_s - V(x_s))^2)
//   total     policy + algo.value_coef baseline - algo.entropy mean(entropy)
// with the V-trace targets v_s and rho~_s of returns.h (impala.clip_rho, clip_c, clip_pg_rho)
// computed from the learner's current policy against the behaviour log-probabilities. The
// targets carry no gradient; the bootstrap value after the last step is V(x_T).
#pragma once

#include <torch/torch.h>

#include "distml/rl/policy.h"
#include "distml/rl/rl_config.h"
#include "distml/rl/rollout.h"

namespace distml::rl {

struct VTraceLoss {
  torch::Tensor total;  // to back-propagate
  double policy, baseline, entropy;
  double mean_rho;  // mean of pi / mu over the batch (before clipping)
};

/// The loss of the unrolls `batch` ([T, K] time-major) under `net`'s current parameters.
VTraceLoss vtrace_loss(ActorCriticImpl& net, const Rollout& batch, const RlConfig& config);

}  // namespace distml::rl
