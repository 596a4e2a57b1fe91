// The loss PPO and A2C minimise on a minibatch (Schulman et al. 2017, as CleanRL writes it):
//   policy  -mean(min(ratio A, clip(ratio, 1 - eps, 1 + eps) A)), ratio = pi(a|s) / pi_old(a|s)
//           (without clipping, eps = 0: -mean(ratio A), whose gradient at ratio 1 is A2C's);
//   value   0.5 mean((V - R)^2), or with algo.value_clip = c the larger of that and
//           (V_old + clip(V - V_old, -c, c) - R)^2 per sample;
//   total   policy + algo.value_coef value - algo.entropy entropy.
// With algo.normalize_advantages, A = (A - mean) / (std + 1e-8) over the global minibatch: at
// N ranks every rank's rows of it together, as one process holding them all would normalise.
#pragma once

#include <torch/torch.h>

#include <optional>

#include "distml/comm/communicator.h"
#include "distml/core/timeline.h"
#include "distml/rl/policy.h"
#include "distml/rl/rl_config.h"
#include "distml/rl/running_stats.h"

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
  double old_approx_kl;  // the older estimator, mean(-log ratio)
};

/// What normalises a minibatch's advantages: their mean and standard deviation (unbiased, as
/// torch's std) over `count` samples.
struct AdvantageScale {
  double count = 0, mean = 0, std = 1;
};

/// Per column of `rows` [n, w] (or [n]), the statistics of every rank's rows together, merged
/// in rank order (Chan et al.) after one all-gather: equal on every rank, and those of the
/// concatenated rows up to float64 rounding.
RunningMeanStd merged_over_ranks(const torch::Tensor& rows, comm::Communicator& comm);

/// The scale of the global minibatch whose rows on this rank are `advantages`.
AdvantageScale global_advantage_scale(const torch::Tensor& advantages, comm::Communicator& comm);

/// The loss of the samples `indices` of `batch` under `net`'s current parameters. With
/// algo.normalize_advantages their advantages are normalised by `scale`, or by their own mean
/// and std when it is not given (one process); a scale of fewer than 2 samples leaves them.
PpoLoss ppo_loss(ActorCriticImpl& net, const PpoBatch& batch, const torch::Tensor& indices,
                 const AlgoConfig& algo, std::optional<AdvantageScale> scale = std::nullopt);

/// One minibatch of (D)PPO on every rank of `comm`: the loss of this rank's `indices`, the
/// advantages normalised over the global minibatch, back-propagated; the gradients are then
/// averaged over the ranks in one all-reduce (recorded as "grad_sync" on `lane`), which carries
/// the loss's numbers too: they come back as the global minibatch's (every rank's minibatch has
/// the same size, so the mean of the ranks' means is the global mean). The gradients stay in
/// `net` for the optimizer's step.
PpoLoss ppo_minibatch_gradient(ActorCriticImpl& net, const PpoBatch& batch,
                               const torch::Tensor& indices, const AlgoConfig& algo,
                               comm::Communicator& comm, Timeline::Lane* lane = nullptr);

/// 1 - Var(returns - values) / Var(returns) over every rank's batch (population variances, as
/// CleanRL's np.var): how much of the returns' variance the behaviour critic explained. NaN
/// when the returns do not vary.
double explained_variance(const PpoBatch& batch, comm::Communicator& comm);

}  // namespace distml::rl
