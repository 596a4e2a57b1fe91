#include "distml/rl/algos/ppo_loss.h"

namespace distml::rl {

PpoLoss ppo_loss(ActorCriticImpl& net, const PpoBatch& b, const torch::Tensor& idx,
                 const AlgoConfig& algo) {
  const auto out = net.forward(b.observations.index_select(0, idx));
  const auto log_p = net.log_prob(out.policy, b.actions.index_select(0, idx));
  const auto log_ratio = log_p - b.log_probs.index_select(0, idx);
  const auto ratio = torch::exp(log_ratio);
  double clip_fraction = 0, approx_kl = 0;
  {
    torch::NoGradGuard no_grad;
    approx_kl = ((ratio - 1) - log_ratio).mean().item<double>();
    if (algo.clip > 0)
      clip_fraction = ((ratio - 1).abs() > algo.clip).to(torch::kDouble).mean().item<double>();
  }
  auto adv = b.advantages.index_select(0, idx);
  if (algo.normalize_advantages && adv.numel() > 1) adv = (adv - adv.mean()) / (adv.std() + 1e-8);
  torch::Tensor policy_loss;
  if (algo.clip > 0) {
    const auto clipped = torch::clamp(ratio, 1 - algo.clip, 1 + algo.clip);
    policy_loss = -torch::min(ratio * adv, clipped * adv).mean();
  } else {
    policy_loss = -(ratio * adv).mean();
  }
  const auto returns = b.returns.index_select(0, idx);
  const auto v = out.value;
  torch::Tensor value_loss = (v - returns).pow(2);
  if (algo.value_clip > 0) {
    const auto old_v = b.values.index_select(0, idx);
    const auto v_clipped = old_v + torch::clamp(v - old_v, -algo.value_clip, algo.value_clip);
    value_loss = torch::max(value_loss, (v_clipped - returns).pow(2));
  }
  value_loss = 0.5 * value_loss.mean();
  const auto entropy = net.entropy(out.policy).mean();
  return {policy_loss + algo.value_coef * value_loss - algo.entropy * entropy,
          policy_loss.item<double>(), value_loss.item<double>(), entropy.item<double>(),
          clip_fraction, approx_kl};
}

}  // namespace distml::rl
