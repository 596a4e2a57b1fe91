#include "distml/rl/dpg_networks.h"

#include "distml/core/error.h"

namespace distml::rl {

DpgNetworksImpl::DpgNetworksImpl(const Space& observation, const Space& action,
                                 const NetworkOptions& options) {
  if (action.is_discrete())
    throw ConfigError(
        "DPG networks need continuous actions (apex_dpg runs on pendulum, "
        "mountaincar_continuous, humanoid); for discrete actions use apex");
  const auto act = static_cast<std::int64_t>(action.size());
  // A small last-layer gain starts mu near the middle of the bounds, with Q near 0.
  actor_ = register_module("actor", make_mlp(observation.size(), options, act, 0.01));
  critic_ = register_module("critic", make_mlp(observation.size() + act, options, 1, 1.0));
  low_ = torch::tensor(action.low);
  high_ = torch::tensor(action.high);
  half_range_ = (high_ - low_) / 2;
}

torch::Tensor DpgNetworksImpl::act(const torch::Tensor& observations) {
  return low_ + (torch::tanh(actor_->forward(observations)) + 1) * half_range_;
}

torch::Tensor DpgNetworksImpl::q(const torch::Tensor& observations, const torch::Tensor& actions) {
  return critic_->forward(torch::cat({observations, actions}, 1)).squeeze(-1);
}

torch::Tensor dpg_critic_target(DpgNetworksImpl& target, const torch::Tensor& rewards,
                                const torch::Tensor& discounts,
                                const torch::Tensor& next_observations) {
  torch::NoGradGuard no_grad;
  return rewards + discounts * target.q(next_observations, target.act(next_observations));
}

}  // namespace distml::rl
