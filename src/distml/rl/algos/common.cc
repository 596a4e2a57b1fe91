#include "distml/rl/algos/common.h"

#include <mutex>

#include "distml/core/error.h"
#include "distml/rl/run_monitor.h"
#include "distml/train/checkpoint_file.h"
#include "distml/train/optimizer_factory.h"

namespace distml::rl {

void prepare_rank(const RlConfig& config) {
  torch::set_num_threads(static_cast<int>(config.run.threads));
}

VectorEnv make_actor_envs(const RlConfig& config, int actor) {
  return VectorEnv(config.env.name, static_cast<int>(config.env.copies),
                   config.run.seed * 1000003ULL + static_cast<std::uint64_t>(actor),
                   env_options(config), static_cast<int>(config.run.env_workers));
}

Normalizer make_normalizer(const RlConfig& config) {
  return Normalizer(config.normalize, env_spaces(config.env.name).observation.size(),
                    static_cast<int>(config.env.copies), config.algo.gamma);
}

namespace {

// Builds a network from torch's global generator seeded with run.seed, under one lock: the
// in-process ranks (threads) share that generator and must each get the same initial weights.
template <class Network>
Network seeded_network(const RlConfig& config) {
  static std::mutex mutex;
  const EnvSpaces& spaces = env_spaces(config.env.name);
  std::lock_guard lock(mutex);
  torch::manual_seed(config.run.seed);
  return Network(spaces.observation, spaces.action, config.network);
}

}  // namespace

ActorCritic make_actor_critic(const RlConfig& config) {
  return seeded_network<ActorCritic>(config);
}

QNetwork make_q_network(const RlConfig& config) { return seeded_network<QNetwork>(config); }

DpgNetworks make_dpg_networks(const RlConfig& config) {
  return seeded_network<DpgNetworks>(config);
}

std::unique_ptr<torch::optim::Optimizer> make_optimizer(const RlConfig& config,
                                                        torch::nn::Module& net) {
  return train::make_optimizer(net.parameters(), config.optim);
}

Policy greedy_policy(ActorCritic net, const Normalizer& normalizer) {
  return [net, normalizer](const torch::Tensor& observation) mutable {
    torch::Tensor seen = observation.contiguous().clone();
    normalizer.normalize(std::span<float>(seen.data_ptr<float>(), seen.numel()));
    return ActionSampler::greedy(*net, net->forward(seen).policy);
  };
}

Policy greedy_snapshot(const RlConfig& config, ActorCritic net, const Normalizer& normalizer) {
  ActorCritic copy = make_actor_critic(config);
  load_flat_parameters(*copy, flat_parameters(*net));
  return greedy_policy(copy, normalizer);
}

void average_gradients(torch::nn::Module& net, comm::Communicator& comm,
                       std::vector<double>* values) {
  if (comm.size() == 1) return;
  const auto parameters = net.parameters();
  DML_CHECK(!parameters.empty(), "a network without parameters");
  const auto options = parameters.front().options();
  DML_CHECK(options.dtype() == torch::kFloat || options.dtype() == torch::kDouble,
            "gradients of float32 or float64 parameters");
  std::vector<torch::Tensor> parts;
  for (const auto& p : parameters)
    parts.push_back(p.grad().defined() ? p.grad().reshape({-1})
                                       : torch::zeros({p.numel()}, options));
  if (values) parts.push_back(torch::tensor(*values, torch::kDouble).to(options.dtype()));
  torch::Tensor flat = torch::cat(parts).contiguous();
  const comm::DType dtype = options.dtype() == torch::kFloat ? comm::DType::f32 : comm::DType::f64;
  comm.allreduce(comm::Buffer{flat.data_ptr(), static_cast<std::size_t>(flat.numel()), dtype});
  flat.div_(comm.size());
  torch::NoGradGuard no_grad;
  std::int64_t at = 0;
  for (auto& p : parameters) {
    const auto g = flat.slice(0, at, at + p.numel()).view(p.sizes());
    if (p.grad().defined())
      p.mutable_grad().copy_(g);
    else
      p.mutable_grad() = g.clone();
    at += p.numel();
  }
  if (values)
    for (auto& v : *values) v = flat[at++].item<double>();
}

double clip_gradients(torch::nn::Module& net, double max_norm) {
  if (max_norm <= 0) {
    double sum = 0;
    for (const auto& p : net.parameters())
      if (p.grad().defined()) sum += p.grad().pow(2).sum().item<double>();
    return std::sqrt(sum);
  }
  return torch::nn::utils::clip_grad_norm_(net.parameters(), max_norm);
}

LearnerCounters resume_if_asked(const RlConfig& config, torch::nn::Module& net,
                                torch::optim::Optimizer& optimizer, Normalizer* normalizer) {
  if (config.run.resume.empty()) return {};
  const std::string path = checkpoint_path(config.run.resume);
  return load_learner_state(train::read_checked_file(path), path, {net, optimizer, normalizer});
}

double annealed_lr(const RlConfig& config, std::int64_t done, std::int64_t total) {
  if (!config.algo.anneal_lr || total <= 0) return config.optim.lr;
  const double left = 1.0 - static_cast<double>(done) / static_cast<double>(total);
  return config.optim.lr * std::max(left, 0.0);
}

void set_annealed_lr(torch::optim::Optimizer& optimizer, const RlConfig& config, std::int64_t done,
                     std::int64_t total) {
  train::set_lr(optimizer, annealed_lr(config, done, total));
}

double current_lr(torch::optim::Optimizer& optimizer) {
  return optimizer.param_groups().front().options().get_lr();
}

}  // namespace distml::rl
