// PPO (Schulman et al. 2017) and A2C, synchronous over the ranks: every rank is an
// actor-learner that collects a rollout from its own environment copies, and every minibatch
// gradient is averaged over all ranks before the step — DPPO's synchronous variant (Heess et
// al. 2017), and A2C as the synchronous A3C. The ranks start from the same parameters and
// apply the same averaged gradients, so they stay identical. A minibatch is every rank's
// `samples / minibatches` rows together: its advantages are normalised over all of them and its
// diagnostics are its own, so N ranks compute what one process holding the N rollouts would.
//
// A2C is this loop with one pass, one minibatch, no clipping and GAE(1) (n-step returns):
// at the parameters that collected the rollout the ratio is 1 and the clipped surrogate's
// gradient is the policy gradient's.
#include <cmath>

#include "distml/data/permutation.h"
#include "distml/rl/algos/algorithm.h"
#include "distml/rl/algos/common.h"
#include "distml/rl/algos/ppo_loss.h"
#include "distml/rl/returns.h"
#include "distml/rl/rollout.h"
#include "distml/rl/run_monitor.h"

namespace distml::rl {
namespace {

// The rollout flattened to T*K samples, with its advantages and returns.
PpoBatch training_batch(const Rollout& r, ActorCriticImpl& net, double lambda) {
  torch::NoGradGuard no_grad;
  const auto steps = r.rewards.size(0), copies = r.rewards.size(1);
  const auto bootstrap = net.forward(r.observations[steps]).value;
  const Advantages a = gae(r.rewards, r.values, bootstrap, r.discounts, lambda);
  const auto n = steps * copies;
  return {r.observations.slice(0, 0, steps).reshape({n, -1}),
          r.actions.reshape({n, -1}),
          r.log_probs.reshape({n}),
          r.values.reshape({n}),
          a.advantages.reshape({n}),
          a.returns.reshape({n})};
}

}  // namespace

RunResult run_policy_gradient(const RlConfig& config, comm::Communicator& comm,
                              const RunHooks& hooks) {
  prepare_rank(config);
  const AlgoConfig& algo = config.algo;
  ActorCritic net = make_actor_critic(config);
  auto optimizer = make_optimizer(config, *net);
  Normalizer normalizer = make_normalizer(config);
  LearnerCounters counters = resume_if_asked(config, *net, *optimizer, &normalizer);
  VectorEnv envs = make_actor_envs(config, comm.rank());
  ActionSampler sampler(config.run.seed * 7919 + static_cast<std::uint64_t>(comm.rank()) +
                        static_cast<std::uint64_t>(counters.update) * 104729);
  const std::int64_t steps_per_update = algo.unroll * config.env.copies * comm.size();
  const std::int64_t total_updates =
      (config.run.env_steps + steps_per_update - 1) / steps_per_update;
  const std::int64_t samples = algo.unroll * config.env.copies;
  const std::int64_t minibatch = std::max<std::int64_t>(1, samples / algo.minibatches);
  const bool lead = comm.rank() == 0;
  RunMonitor monitor(
      config, hooks, [&] { return greedy_policy(net, normalizer); },
      [&] { return save_learner_state({*net, *optimizer, &normalizer}, counters); });
  Timeline::Lane* actor_lane = lane_of(hooks.timeline, "actor");
  Timeline::Lane* learner_lane = lane_of(hooks.timeline, "learner");

  nlohmann::json diagnostics;  // of the last update, for the done line
  while (counters.update < total_updates) {
    set_annealed_lr(*optimizer, config, counters.update, total_updates);
    const Rollout rollout = [&] {
      Span collecting(actor_lane, "rollout", "update", counters.update);
      return collect_rollout(*net, envs, normalizer, sampler, algo.unroll, algo.gamma);
    }();
    normalizer.sync(comm);
    Span updating(learner_lane, "update", "update", counters.update);
    const PpoBatch batch = training_batch(rollout, *net, algo.lambda);
    PpoLoss last{};
    double clip_fraction = 0;  // mean over the update's minibatches, as CleanRL reports it
    std::int64_t minibatches = 0, epochs = 0;
    while (epochs < algo.epochs) {
      const auto order = data::shuffled_permutation(
          static_cast<std::size_t>(samples), config.run.seed + comm.rank(),
          static_cast<std::uint64_t>(counters.update * algo.epochs + epochs));
      for (std::int64_t start = 0; start + minibatch <= samples; start += minibatch) {
        std::vector<std::int64_t> picked(order.begin() + start, order.begin() + start + minibatch);
        last = ppo_minibatch_gradient(*net, batch, torch::tensor(picked), algo, comm, learner_lane);
        clip_fraction += last.clip_fraction;
        ++minibatches;
        clip_gradients(*net, algo.max_grad_norm);
        optimizer->step();
      }
      ++epochs;
      // CleanRL's early stop: the last minibatch's approx_kl, the global minibatch's (the same
      // on every rank, so every rank stops together).
      if (algo.target_kl > 0 && last.approx_kl > algo.target_kl) break;
    }
    ++counters.update;
    counters.env_steps += steps_per_update;
    const double explained = explained_variance(batch, comm);
    std::array<double, 2> episodes{rollout.finished_return_sum,
                                   static_cast<double>(rollout.finished_episodes)};
    comm.allreduce(comm::view(episodes));
    std::array<std::int64_t, 1> stop{0};
    if (lead) {
      diagnostics = {{"clip_fraction", clip_fraction / minibatches},
                     {"approx_kl", last.approx_kl},
                     {"old_approx_kl", last.old_approx_kl},
                     {"explained_variance", number_or_null(explained)}};
      if (!net->discrete()) diagnostics["policy_std"] = net->log_std().exp().mean().item<double>();
      nlohmann::json fields = {{"policy_loss", last.policy},
                               {"value_loss", last.value},
                               {"entropy", last.entropy},
                               {"lr", current_lr(*optimizer)}};
      fields.update(diagnostics);
      if (algo.target_kl > 0) fields["epochs"] = epochs;
      monitor.add_episodes(episodes[0], static_cast<std::int64_t>(episodes[1]));
      stop[0] = monitor.after_update(counters.update, counters.env_steps, fields);
    }
    comm.broadcast(comm::view(stop), 0);
    if (stop[0]) break;
  }
  RunResult result;
  if (lead) {
    result = monitor.finish(counters.update, counters.env_steps);
    result.report.update(diagnostics);
  }
  result.parameter_digest = parameter_digest(*net);
  return result;
}

}  // namespace distml::rl
