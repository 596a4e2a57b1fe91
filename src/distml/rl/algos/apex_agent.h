// What distinguishes the two Ape-X learners (Horgan et al. 2018): Ape-X DQN for discrete actions
// and Ape-X DPG for continuous ones. The roles' loops (apex_roles.h) are shared; an agent says
// how an actor explores and prioritises what it sends, and how the learner updates.
//
// DQN: dueling Q-network; actor i of N acts epsilon-greedily with
//      epsilon_i = apex.epsilon^(1 + apex.epsilon_alpha i / (N - 1)); double-DQN target
//      R + discount Q_target(s', argmax_a Q(s', a)); Huber loss weighted by the importance
//      weights; the target network copied every apex.target_update updates.
// DPG: deterministic actor mu(s) in the action bounds and critic Q(s, a); actor i of N adds
//      Gaussian noise of sigma_i = apex.noise (apex.noise_min / apex.noise)^(i / (N - 1)) half
//      action ranges (clipped to the bounds); critic target R + discount Q'(s', mu'(s')) with
//      target networks moved softly, theta' <- apex.tau theta + (1 - apex.tau) theta', every
//      update; critic loss the weighted squared TD error, actor loss -mean Q(s, mu(s)).
// Both prioritise by |TD error|: actors with their own copy of the networks, the learner with
// its online ones. R is the n-step return and discount gamma^n, or 0 where the episode ended.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <vector>

#include "distml/rl/algos/apex_messages.h"
#include "distml/rl/evaluation.h"
#include "distml/rl/policy.h"
#include "distml/rl/rl_config.h"

namespace distml::rl {

/// Transitions as tensors: observations [B, obs], actions [B, act], rewards [B],
/// discounts [B], next_observations [B, obs].
struct TransitionBatch {
  torch::Tensor observations, actions, rewards, discounts, next_observations;
  static TransitionBatch of(const std::vector<Transition>& items, const apex::Layout& layout);
  static TransitionBatch of(const PrioritizedReplay::Batch& batch, const apex::Layout& layout);
};

/// An actor's copy of the networks.
class ApexActorAgent {
 public:
  virtual ~ApexActorAgent() = default;
  /// What the learner's parameters messages load into.
  virtual torch::nn::Module& networks() = 0;
  /// The actions the environments get for observations [K, obs]: K x action size floats.
  virtual std::vector<float> explore(const torch::Tensor& observations) = 0;
  /// |TD error| of each transition under this copy: the initial priorities [B].
  virtual torch::Tensor priorities(const TransitionBatch& batch) = 0;
};

/// The learner's networks and update.
class ApexLearnerAgent {
 public:
  virtual ~ApexLearnerAgent() = default;
  /// The online networks: sent to the actors and checkpointed.
  virtual torch::nn::Module& networks() = 0;
  virtual torch::optim::Optimizer& optimizer() = 0;
  /// After a resume loaded networks(): the target networks start from them.
  virtual void reset_targets() = 0;
  struct Update {
    torch::Tensor priorities;  // |TD error| per transition [B]
    nlohmann::json fields;     // losses, for the progress line
  };
  /// One update on `batch` weighted by the importance `weights` [B].
  virtual Update train(const TransitionBatch& batch, const torch::Tensor& weights) = 0;
  /// The greedy policy for evaluation.
  virtual Policy greedy() = 0;
  /// The done line's description of the actors' exploration (their epsilons or noise scales).
  virtual nlohmann::json exploration(int actors) const = 0;
};

/// Double DQN's target (van Hasselt et al. 2016): R + discount Q_target(s', a*) with
/// a* = argmax_a Q_online(s', a), per transition [B]. No gradient.
torch::Tensor double_dqn_target(QNetworkImpl& online, QNetworkImpl& target,
                                const torch::Tensor& rewards, const torch::Tensor& discounts,
                                const torch::Tensor& next_observations);

/// epsilon_i of DQN actor `index` of `actors`.
double actor_epsilon(const ApexConfig& c, int index, int actors);
/// sigma_i of DPG actor `index` of `actors`, in half action ranges.
double actor_noise(const ApexConfig& c, int index, int actors);

/// The agents of config.algo.name (apex: DQN, apex_dpg: DPG); `seed` seeds actor `index`'s
/// exploration.
std::unique_ptr<ApexActorAgent> make_apex_actor(const RlConfig& config, int index, int actors,
                                                std::uint64_t seed);
std::unique_ptr<ApexLearnerAgent> make_apex_learner(const RlConfig& config);

std::unique_ptr<ApexActorAgent> make_dqn_actor(const RlConfig& config, int index, int actors,
                                               std::uint64_t seed);  // apex_dqn.cc
std::unique_ptr<ApexLearnerAgent> make_dqn_learner(const RlConfig& config);
std::unique_ptr<ApexActorAgent> make_dpg_actor(const RlConfig& config, int index, int actors,
                                               std::uint64_t seed);  // apex_dpg.cc
std::unique_ptr<ApexLearnerAgent> make_dpg_learner(const RlConfig& config);

}  // namespace distml::rl
