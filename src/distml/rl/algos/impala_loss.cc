#include "distml/rl/algos/impala_loss.h"

#include "distml/rl/returns.h"

namespace distml::rl {

VTraceLoss vtrace_loss(ActorCriticImpl& net, const Rollout& b, const RlConfig& config) {
  const auto steps = b.rewards.size(0), copies = b.rewards.size(1);
  const auto out = net.forward(b.observations.slice(0, 0, steps).reshape({steps * copies, -1}));
  const auto log_p =
      net.log_prob(out.policy, b.actions.reshape({steps * copies, -1})).reshape({steps, copies});
  const auto values = out.value.reshape({steps, copies});
  torch::Tensor bootstrap;
  {
    torch::NoGradGuard no_grad;
    bootstrap = net.forward(b.observations[steps]).value;
  }
  const auto log_rhos = log_p.detach() - b.log_probs;
  const ImpalaConfig& c = config.impala;
  const VTraceTargets t = vtrace(log_rhos, b.discounts, b.rewards, values.detach(), bootstrap,
                                 c.clip_rho, c.clip_c, c.clip_pg_rho);
  const auto policy_loss = -(log_p * t.pg_advantages).mean();
  const auto baseline_loss = 0.5 * (t.vs - values).pow(2).mean();
  const auto entropy = net.entropy(out.policy).mean();
  return {policy_loss + config.algo.value_coef * baseline_loss - config.algo.entropy * entropy,
          policy_loss.item<double>(), baseline_loss.item<double>(), entropy.item<double>(),
          log_rhos.exp().mean().item<double>()};
}

}  // namespace distml::rl
