// Ape-X DQN's agents (apex_agent.h): epsilon-greedy actors over a dueling Q-network, and a
// double-DQN learner with a Huber loss and a target network copied every apex.target_update.
#include "distml/rl/algos/apex_agent.h"
#include "distml/rl/algos/common.h"

namespace distml::rl {
namespace {

// max_a Q(s', a) bootstrapped targets of the actor's own network, as the paper's actors
// prioritise.
class DqnActor final : public ApexActorAgent {
 public:
  DqnActor(const RlConfig& config, int index, int actors, std::uint64_t seed)
      : net_(make_q_network(config)),
        sampler_(seed),
        epsilon_(actor_epsilon(config.apex, index, actors)) {}

  torch::nn::Module& networks() override { return *net_; }

  std::vector<float> explore(const torch::Tensor& observations) override {
    torch::NoGradGuard no_grad;
    return sampler_.epsilon_greedy(net_->forward(observations), epsilon_);
  }

  torch::Tensor priorities(const TransitionBatch& b) override {
    torch::NoGradGuard no_grad;
    const auto q_taken = net_->forward(b.observations).gather(1, b.actions.to(torch::kLong));
    const auto target =
        b.rewards + b.discounts * std::get<0>(net_->forward(b.next_observations).max(1));
    return (target - q_taken.squeeze(1)).abs();
  }

 private:
  QNetwork net_;
  ActionSampler sampler_;
  double epsilon_;
};

class DqnLearner final : public ApexLearnerAgent {
 public:
  explicit DqnLearner(const RlConfig& config)
      : config_(config),
        online_(make_q_network(config)),
        target_(make_q_network(config)),
        optimizer_(make_optimizer(config, *online_)) {}

  torch::nn::Module& networks() override { return *online_; }
  torch::optim::Optimizer& optimizer() override { return *optimizer_; }
  void reset_targets() override { load_flat_parameters(*target_, flat_parameters(*online_)); }

  Update train(const TransitionBatch& b, const torch::Tensor& weights) override {
    const torch::Tensor y =
        double_dqn_target(*online_, *target_, b.rewards, b.discounts, b.next_observations);
    const auto q =
        online_->forward(b.observations).gather(1, b.actions.to(torch::kLong)).squeeze(1);
    namespace F = torch::nn::functional;
    const auto loss =
        (weights * F::huber_loss(q, y, F::HuberLossFuncOptions().reduction(torch::kNone))).mean();
    optimizer_->zero_grad();
    loss.backward();
    clip_gradients(*online_, config_.algo.max_grad_norm);
    optimizer_->step();
    if (++updates_ % config_.apex.target_update == 0) reset_targets();
    return {(y - q).detach().abs(), {{"loss", loss.item<double>()}}};
  }

  Policy greedy() override {
    return [net = online_](const torch::Tensor& observation) mutable {
      torch::NoGradGuard no_grad;
      return std::vector<float>{
          static_cast<float>(net->forward(observation).argmax(-1).item<std::int64_t>())};
    };
  }

  nlohmann::json exploration(int actors) const override {
    std::vector<double> epsilons;
    for (int i = 0; i < actors; ++i) epsilons.push_back(actor_epsilon(config_.apex, i, actors));
    return {{"actor_epsilons", epsilons}};
  }

 private:
  const RlConfig& config_;
  QNetwork online_, target_;
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
  std::int64_t updates_ = 0;
};

}  // namespace

torch::Tensor double_dqn_target(QNetworkImpl& online, QNetworkImpl& target,
                                const torch::Tensor& rewards, const torch::Tensor& discounts,
                                const torch::Tensor& next_observations) {
  // The online network picks the next action, the target network values it.
  torch::NoGradGuard no_grad;
  const auto best = online.forward(next_observations).argmax(1, /*keepdim=*/true);
  return rewards + discounts * target.forward(next_observations).gather(1, best).squeeze(1);
}

std::unique_ptr<ApexActorAgent> make_dqn_actor(const RlConfig& config, int index, int actors,
                                               std::uint64_t seed) {
  return std::make_unique<DqnActor>(config, index, actors, seed);
}

std::unique_ptr<ApexLearnerAgent> make_dqn_learner(const RlConfig& config) {
  return std::make_unique<DqnLearner>(config);
}

}  // namespace distml::rl
