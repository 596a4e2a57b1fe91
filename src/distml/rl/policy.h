// The networks of the RL algorithms: an actor-critic (a categorical or diagonal-Gaussian policy
// and a value head, as separate MLPs) and a dueling Q-network for Ape-X, with action sampling
// from a seeded generator so that a run is reproducible on every engine.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <span>
#include <vector>

#include "distml/data/permutation.h"
#include "distml/rl/envs/env.h"

namespace distml::rl {

struct NetworkOptions {
  std::vector<std::int64_t> hidden = {64, 64};
  bool tanh = true;           // tanh between layers (else ReLU)
  double init_log_std = 0.0;  // Gaussian policies: the starting log standard deviation
  bool squash = false;        // Gaussian policies: tanh-squash samples into the action bounds
};

/// An MLP of options.hidden layers (tanh or ReLU between) with orthogonal initialisation (gain
/// sqrt 2 inside, `out_gain` on the last layer, as PPO implementations do); `out` = 0 leaves the
/// last hidden layer as the output.
torch::nn::Sequential make_mlp(std::int64_t in, const NetworkOptions& options, std::int64_t out,
                               double out_gain);

class ActorCriticImpl : public torch::nn::Module {
 public:
  ActorCriticImpl(const Space& observation, const Space& action, const NetworkOptions& options);

  struct Output {
    torch::Tensor policy;  // discrete: logits [N, n]; box: means [N, d]
    torch::Tensor value;   // [N]
  };
  Output forward(const torch::Tensor& observations);
  /// log pi(a|s) of sampled actions [N, action size] under `policy` (from forward): [N]. With
  /// network.squash the samples are the Gaussian's, before tanh, and the log-density is that of
  /// the squashed action (the change of variables' -sum log(1 - tanh(u)^2)).
  torch::Tensor log_prob(const torch::Tensor& policy, const torch::Tensor& actions) const;
  /// [N]; for a squashed Gaussian, the entropy of the Gaussian before the squash.
  torch::Tensor entropy(const torch::Tensor& policy) const;
  /// What the environment gets for sampled actions (row-major [N x action size]): discrete ones
  /// as they are; Gaussian ones clipped to the action bounds (Gymnasium's ClipAction, as CleanRL
  /// does), or with network.squash mapped into them: low + (tanh(u) + 1) (high - low) / 2.
  std::vector<float> env_actions(std::vector<float> actions) const;
  bool discrete() const { return discrete_; }
  /// Gaussian policies: the state-independent log standard deviation per dimension.
  const torch::Tensor& log_std() const { return log_std_; }

 private:
  bool discrete_;
  bool squash_;
  std::vector<float> low_, high_;  // box: the action bounds
  torch::nn::Sequential actor_{nullptr}, critic_{nullptr};
  torch::Tensor log_std_;  // box only
};
TORCH_MODULE(ActorCritic);

/// Dueling Q-network (Wang et al. 2016): Q = V + A - mean(A). Discrete actions only.
class QNetworkImpl : public torch::nn::Module {
 public:
  QNetworkImpl(const Space& observation, const Space& action, const NetworkOptions& options);
  torch::Tensor forward(const torch::Tensor& observations);  // [N, actions]

 private:
  torch::nn::Sequential body_{nullptr};
  torch::nn::Linear value_{nullptr}, advantage_{nullptr};
};
TORCH_MODULE(QNetwork);

/// Draws actions from policy outputs with its own generator (not torch's global one, which
/// threads of the in-process engine would share).
class ActionSampler {
 public:
  explicit ActionSampler(std::uint64_t seed) : rng_(seed) {}
  /// One action per row of `policy`, row-major [N x action size].
  std::vector<float> sample(const ActorCriticImpl& net, const torch::Tensor& policy);
  /// The most likely action per row, as the environment gets it: argmax for discrete, the mean
  /// (through env_actions) for box.
  static std::vector<float> greedy(const ActorCriticImpl& net, const torch::Tensor& policy);
  /// Epsilon-greedy over Q-values [N, actions].
  std::vector<float> epsilon_greedy(const torch::Tensor& q, double epsilon);
  double uniform();  // in [0, 1)
  double normal();   // standard normal

 private:
  data::SplitMix64 rng_;
};

/// Parameters (or their gradients) as one flat float vector, in module order.
std::vector<float> flat_parameters(torch::nn::Module& module);
void load_flat_parameters(torch::nn::Module& module, std::span<const float> flat);
std::vector<float> flat_gradients(torch::nn::Module& module);
void load_flat_gradients(torch::nn::Module& module, std::span<const float> flat);
std::size_t parameter_count(torch::nn::Module& module);
/// A 64-bit FNV-1a hash of the parameters' bytes: equal exactly when the parameters are.
std::uint64_t parameter_digest(torch::nn::Module& module);

/// Rows of floats as a [rows, width] float tensor (copied).
torch::Tensor as_tensor(std::span<const float> values, std::int64_t width);

}  // namespace distml::rl
