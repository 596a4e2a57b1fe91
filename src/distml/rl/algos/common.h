// Pieces the algorithms share: building the network and optimizer from the config, the greedy
// policy for evaluation, gradient averaging and clipping, and restoring a checkpoint.
#pragma once

#include <torch/torch.h>

#include <memory>

#include "distml/comm/communicator.h"
#include "distml/rl/dpg_networks.h"
#include "distml/rl/envs/vector_env.h"
#include "distml/rl/evaluation.h"
#include "distml/rl/learner_state.h"
#include "distml/rl/policy.h"
#include "distml/rl/rl_config.h"

namespace distml::rl {

/// Sets the intra-op threads of this rank.
void prepare_rank(const RlConfig& config);

/// The environments of actor `actor` (distinct seeds per actor).
VectorEnv make_actor_envs(const RlConfig& config, int actor);
/// The normaliser of an actor with config.env.copies copies (or of a learner: its statistics are
/// the shared ones), as [normalize] says.
Normalizer make_normalizer(const RlConfig& config);

/// The actor-critic for config.env, initialised from config.run.seed (equal on every rank).
ActorCritic make_actor_critic(const RlConfig& config);
/// The Q-network of Ape-X, likewise.
QNetwork make_q_network(const RlConfig& config);
/// The actor and critic of Ape-X DPG, likewise.
DpgNetworks make_dpg_networks(const RlConfig& config);
std::unique_ptr<torch::optim::Optimizer> make_optimizer(const RlConfig& config,
                                                        torch::nn::Module& net);

/// The greedy action of `net` for an observation normalised by `normalizer`'s statistics (as
/// they are now: the policy keeps a copy).
Policy greedy_policy(ActorCritic net, const Normalizer& normalizer);
/// The same with a copy of the parameters too: unaffected by later updates of `net`.
Policy greedy_snapshot(const RlConfig& config, ActorCritic net, const Normalizer& normalizer);

/// Averages the gradients of `net` over the ranks of `comm` in one flat all-reduce, in the
/// parameters' dtype; `values` (per-rank numbers to average too, such as a minibatch's
/// diagnostics) travel in the same all-reduce and come back averaged.
void average_gradients(torch::nn::Module& net, comm::Communicator& comm,
                       std::vector<double>* values = nullptr);
/// Clips the global gradient norm when max_norm > 0; returns the norm before clipping.
double clip_gradients(torch::nn::Module& net, double max_norm);

/// Restores config.run.resume into net, optimizer and the normaliser's shared statistics (if
/// any); counters zero when not resuming.
LearnerCounters resume_if_asked(const RlConfig& config, torch::nn::Module& net,
                                torch::optim::Optimizer& optimizer,
                                Normalizer* normalizer = nullptr);

/// The learning rate after `done` of the run's `total` (updates, or env steps) when annealing
/// linearly to 0 (algo.anneal_lr); optim.lr otherwise.
double annealed_lr(const RlConfig& config, std::int64_t done, std::int64_t total);
/// Sets every parameter group's learning rate to annealed_lr(config, done, total).
void set_annealed_lr(torch::optim::Optimizer& optimizer, const RlConfig& config, std::int64_t done,
                     std::int64_t total);
/// The learning rate the optimizer's next step uses (its first parameter group's): what the
/// update lines report as `lr`.
double current_lr(torch::optim::Optimizer& optimizer);

}  // namespace distml::rl
