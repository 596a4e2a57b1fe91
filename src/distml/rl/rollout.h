// A T-step rollout of K environment copies under the current policy, time-major, as PPO, A2C,
// A3C and IMPALA's actors collect it; and its flat form for an unroll message.
//
// Observations and rewards pass through the actor's Normalizer (a no-op unless [normalize] asks
// for it): the rollout holds what the network saw and the scaled rewards it learns from.
// Actions are the sampled ones; the environments get ActorCriticImpl::env_actions of them.
//
// With run.env_workers > 1 the copies form two groups (VectorEnv): while one group steps on the
// workers, the policy acts for the other, so inference and environment steps overlap. Every copy
// then gets the same actions as with one worker (the sampler draws in the same order; only the
// network's batch is half as wide), with one difference where [normalize] is on: each group's
// observations are counted into the statistics as it is seen, half a step apart.
//
// Truncation: when the time limit cuts an episode, gamma * V(final observation) is added to the
// step's (scaled) reward and its discount is 0, so every return and advantage formula can cut at
// discount 0 without treating a time-out as failure.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <span>
#include <vector>

#include "distml/rl/envs/vector_env.h"
#include "distml/rl/normalizer.h"
#include "distml/rl/policy.h"

namespace distml::rl {

struct Rollout {
  torch::Tensor observations;      // [T + 1, K, obs]: the last row is where the next one starts
  torch::Tensor actions;           // [T, K, action size]
  torch::Tensor log_probs;         // [T, K]: of the behaviour policy
  torch::Tensor values;            // [T, K]: of the behaviour policy's critic
  torch::Tensor rewards;           // [T, K], truncation bootstrap included
  torch::Tensor discounts;         // [T, K]: gamma, or 0 where an episode ended
  double finished_return_sum = 0;  // episodes that ended during the rollout
  std::int64_t finished_episodes = 0;
};

/// Runs every copy of `envs` for `steps` steps, sampling actions from `net`; `normalizer`
/// counts and normalises the observations and scales the rewards.
Rollout collect_rollout(ActorCriticImpl& net, VectorEnv& envs, Normalizer& normalizer,
                        ActionSampler& sampler, std::int64_t steps, double gamma);

/// The shape of a rollout, to size and check unroll messages.
struct RolloutShape {
  std::int64_t steps, copies, observation_size, action_size;
  std::size_t floats() const;
};
RolloutShape shape_of(const VectorEnv& envs, std::int64_t steps);
std::vector<float> pack(const Rollout& rollout);
/// Rebuilds a rollout from pack()'s floats; `flat.size()` must be shape.floats().
Rollout unpack(std::span<const float> flat, const RolloutShape& shape);

/// Rollouts side by side: [T, K1 + K2 + ...] (the learner's batch of unrolls).
Rollout concatenate(const std::vector<Rollout>& rollouts);

}  // namespace distml::rl
