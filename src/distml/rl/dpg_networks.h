// The networks of Ape-X DPG, as DDPG (Lillicrap et al. 2016) has them: a deterministic actor
// mu(s), an MLP whose tanh output is mapped into the action bounds, and a critic Q(s, a), an MLP
// of the observation and action side by side. One module holds both, so that one parameters
// message and one checkpoint carry them.
#pragma once

#include <torch/torch.h>

#include <vector>

#include "distml/rl/envs/env.h"
#include "distml/rl/policy.h"

namespace distml::rl {

class DpgNetworksImpl : public torch::nn::Module {
 public:
  /// Box actions only (ConfigError otherwise).
  DpgNetworksImpl(const Space& observation, const Space& action, const NetworkOptions& options);
  /// mu(s) for observations [N, obs]: [N, act], inside the action bounds.
  torch::Tensor act(const torch::Tensor& observations);
  /// Q(s, a) for observations [N, obs] and actions [N, act]: [N].
  torch::Tensor q(const torch::Tensor& observations, const torch::Tensor& actions);
  std::vector<torch::Tensor> actor_parameters() { return actor_->parameters(); }
  /// Half the width of each action dimension [act]: the unit of the exploration noise.
  const torch::Tensor& half_range() const { return half_range_; }
  const torch::Tensor& low() const { return low_; }
  const torch::Tensor& high() const { return high_; }

 private:
  torch::nn::Sequential actor_{nullptr}, critic_{nullptr};
  torch::Tensor low_, high_, half_range_;  // not parameters: fixed by the action space
};
TORCH_MODULE(DpgNetworks);

/// The critic's target of Ape-X DPG under the target networks: R + discount Q'(s', mu'(s')),
/// where R is the n-step return and discount gamma^n, or 0 where the episode ended. No gradient.
torch::Tensor dpg_critic_target(DpgNetworksImpl& target, const torch::Tensor& rewards,
                                const torch::Tensor& discounts,
                                const torch::Tensor& next_observations);

}  // namespace distml::rl
