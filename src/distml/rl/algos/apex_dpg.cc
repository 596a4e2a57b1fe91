// Ape-X DPG's agents (apex_agent.h): actors that add Gaussian noise of their own scale to the
// deterministic policy, and a DDPG learner with soft-updated target networks.
#include "distml/rl/algos/apex_agent.h"
#include "distml/rl/algos/common.h"

namespace distml::rl {
namespace {

class DpgActor final : public ApexActorAgent {
 public:
  DpgActor(const RlConfig& config, int index, int actors, std::uint64_t seed)
      : net_(make_dpg_networks(config)),
        sampler_(seed),
        sigma_(actor_noise(config.apex, index, actors)) {}

  torch::nn::Module& networks() override { return *net_; }

  std::vector<float> explore(const torch::Tensor& observations) override {
    torch::NoGradGuard no_grad;
    const auto mu = net_->act(observations).contiguous();
    const auto half = net_->half_range().contiguous();
    const auto low = net_->low().contiguous(), high = net_->high().contiguous();
    const std::int64_t d = mu.size(1);
    std::vector<float> out(mu.data_ptr<float>(), mu.data_ptr<float>() + mu.numel());
    for (std::size_t i = 0; i < out.size(); ++i) {
      const std::int64_t k = static_cast<std::int64_t>(i) % d;
      const double noisy = out[i] + sigma_ * half.data_ptr<float>()[k] * sampler_.normal();
      out[i] = static_cast<float>(
          std::clamp<double>(noisy, low.data_ptr<float>()[k], high.data_ptr<float>()[k]));
    }
    return out;
  }

  torch::Tensor priorities(const TransitionBatch& b) override {
    torch::NoGradGuard no_grad;
    // The actor's own copy, no target networks, as the paper's actors prioritise.
    const auto y = dpg_critic_target(*net_, b.rewards, b.discounts, b.next_observations);
    return (y - net_->q(b.observations, b.actions)).abs();
  }

 private:
  DpgNetworks net_;
  ActionSampler sampler_;
  double sigma_;
};

class DpgLearner final : public ApexLearnerAgent {
 public:
  explicit DpgLearner(const RlConfig& config)
      : config_(config),
        online_(make_dpg_networks(config)),
        target_(make_dpg_networks(config)),
        optimizer_(make_optimizer(config, *online_)) {}

  torch::nn::Module& networks() override { return *online_; }
  torch::optim::Optimizer& optimizer() override { return *optimizer_; }
  void reset_targets() override { load_flat_parameters(*target_, flat_parameters(*online_)); }

  Update train(const TransitionBatch& b, const torch::Tensor& weights) override {
    const auto y = dpg_critic_target(*target_, b.rewards, b.discounts, b.next_observations);
    const auto q = online_->q(b.observations, b.actions);
    const auto critic_loss = (weights * (q - y).pow(2)).mean();
    optimizer_->zero_grad();
    critic_loss.backward();
    // The actor follows the critic's gradient in the action; only the actor's parameters take
    // this gradient (the critic's come from its own loss alone).
    const auto actor_loss = -online_->q(b.observations, online_->act(b.observations)).mean();
    const std::vector<torch::Tensor> actor_params = online_->actor_parameters();
    const auto grads = torch::autograd::grad({actor_loss}, actor_params);
    for (std::size_t i = 0; i < actor_params.size(); ++i)
      actor_params[i].mutable_grad() = grads[i].clone();  // not a view: zero_grad detaches it
    clip_gradients(*online_, config_.algo.max_grad_norm);
    optimizer_->step();
    soft_update();
    return {(y - q).detach().abs(),
            {{"critic_loss", critic_loss.item<double>()}, {"actor_loss", actor_loss.item<double>()}}};
  }

  Policy greedy() override {
    return [net = online_](const torch::Tensor& observation) mutable {
      torch::NoGradGuard no_grad;
      const auto a = net->act(observation).contiguous();
      return std::vector<float>(a.data_ptr<float>(), a.data_ptr<float>() + a.numel());
    };
  }

  nlohmann::json exploration(int actors) const override {
    std::vector<double> noise;
    for (int i = 0; i < actors; ++i) noise.push_back(actor_noise(config_.apex, i, actors));
    return {{"actor_noise", noise}};
  }

 private:
  // theta' <- tau theta + (1 - tau) theta'.
  void soft_update() {
    torch::NoGradGuard no_grad;
    const auto from = online_->parameters();
    auto to = target_->parameters();
    for (std::size_t i = 0; i < to.size(); ++i) to[i].lerp_(from[i], config_.apex.tau);
  }

  const RlConfig& config_;
  DpgNetworks online_, target_;
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
};

}  // namespace

std::unique_ptr<ApexActorAgent> make_dpg_actor(const RlConfig& config, int index, int actors,
                                               std::uint64_t seed) {
  return std::make_unique<DpgActor>(config, index, actors, seed);
}

std::unique_ptr<ApexLearnerAgent> make_dpg_learner(const RlConfig& config) {
  return std::make_unique<DpgLearner>(config);
}

}  // namespace distml::rl
