#include "distml/rl/policy.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "distml/core/error.h"
#include "distml/core/fnv1a.h"

namespace distml::rl {
torch::nn::Sequential make_mlp(std::int64_t in, const NetworkOptions& o, std::int64_t out,
                               double out_gain) {
  torch::nn::Sequential net;
  auto add_linear = [&](std::int64_t a, std::int64_t b, double gain) {
    torch::nn::Linear layer(a, b);
    torch::nn::init::orthogonal_(layer->weight, gain);
    torch::nn::init::zeros_(layer->bias);
    net->push_back(layer);
  };
  std::int64_t width = in;
  for (std::int64_t h : o.hidden) {
    add_linear(width, h, std::sqrt(2.0));
    if (o.tanh)
      net->push_back(torch::nn::Tanh());
    else
      net->push_back(torch::nn::ReLU());
    width = h;
  }
  if (out > 0) add_linear(width, out, out_gain);
  return net;
}

namespace {

std::int64_t policy_width(const Space& action) {
  return action.is_discrete() ? action.n : action.size();
}

}  // namespace

ActorCriticImpl::ActorCriticImpl(const Space& observation, const Space& action,
                                 const NetworkOptions& options)
    : discrete_(action.is_discrete()),
      squash_(options.squash && !action.is_discrete()),
      low_(action.low),
      high_(action.high) {
  // A small last-layer gain starts the policy near uniform (or the Gaussian near its centre).
  actor_ = register_module("actor",
                           make_mlp(observation.size(), options, policy_width(action), 0.01));
  critic_ = register_module("critic", make_mlp(observation.size(), options, 1, 1.0));
  if (!discrete_)
    log_std_ = register_parameter("log_std", torch::full({action.size()}, options.init_log_std));
}

ActorCriticImpl::Output ActorCriticImpl::forward(const torch::Tensor& observations) {
  return {actor_->forward(observations), critic_->forward(observations).squeeze(-1)};
}

torch::Tensor ActorCriticImpl::log_prob(const torch::Tensor& policy,
                                        const torch::Tensor& actions) const {
  if (discrete_)
    return torch::log_softmax(policy, -1)
        .gather(-1, actions.to(torch::kLong).reshape({-1, 1}))
        .squeeze(-1);
  const auto z = (actions - policy) * torch::exp(-log_std_);
  auto log_p = (-0.5 * z * z - log_std_ - 0.5 * std::log(2 * std::numbers::pi)).sum(-1);
  // log(1 - tanh(u)^2) = -2 log cosh(u) = 2 (log 2 - |u| - log1p(exp(-2|u|))): no cancellation,
  // where 1 - tanh(u)^2 itself rounds to 0 beyond |u| ~ 9 in float32 (and a 1e-6 guard inside
  // the log, as some write it, biases every density).
  if (squash_) {
    const auto a = actions.abs();
    log_p = log_p - (2 * (std::log(2.0) - a - torch::log1p(torch::exp(-2 * a)))).sum(-1);
  }
  return log_p;
}

torch::Tensor ActorCriticImpl::entropy(const torch::Tensor& policy) const {
  if (discrete_) {
    const auto log_p = torch::log_softmax(policy, -1);
    return -(log_p.exp() * log_p).sum(-1);
  }
  const auto per_dim = 0.5 + 0.5 * std::log(2 * std::numbers::pi) + log_std_;
  return per_dim.sum().expand({policy.size(0)});
}

std::vector<float> ActorCriticImpl::env_actions(std::vector<float> actions) const {
  if (discrete_) return actions;
  const std::size_t d = low_.size();
  for (std::size_t i = 0; i < actions.size(); ++i) {
    const float lo = low_[i % d], hi = high_[i % d];
    actions[i] = squash_ ? lo + (std::tanh(actions[i]) + 1.0f) * 0.5f * (hi - lo)
                         : std::clamp(actions[i], lo, hi);
  }
  return actions;
}

QNetworkImpl::QNetworkImpl(const Space& observation, const Space& action,
                           const NetworkOptions& options) {
  if (!action.is_discrete())
    throw ConfigError(
        "a Q-network needs a discrete action space (apex runs on cartpole, "
        "acrobot, mountaincar)");
  DML_CHECK(!options.hidden.empty(), "a Q-network needs at least one hidden layer");
  body_ = register_module("body", make_mlp(observation.size(), options, 0, 1.0));
  value_ = register_module("value", torch::nn::Linear(options.hidden.back(), 1));
  advantage_ = register_module("advantage", torch::nn::Linear(options.hidden.back(), action.n));
}

torch::Tensor QNetworkImpl::forward(const torch::Tensor& observations) {
  const auto h = body_->forward(observations);
  const auto a = advantage_->forward(h);
  return value_->forward(h) + a - a.mean(-1, /*keepdim=*/true);
}

double ActionSampler::uniform() { return static_cast<double>(rng_.next() >> 11) * 0x1.0p-53; }

double ActionSampler::normal() {      // Box-Muller
  const double u1 = 1.0 - uniform();  // in (0, 1]
  const double u2 = uniform();
  return std::sqrt(-2 * std::log(u1)) * std::cos(2 * std::numbers::pi * u2);
}

std::vector<float> ActionSampler::sample(const ActorCriticImpl& net, const torch::Tensor& policy) {
  const auto rows = policy.size(0);
  std::vector<float> out;
  if (net.discrete()) {
    const auto probs = torch::softmax(policy, -1).contiguous();
    const float* p = probs.data_ptr<float>();
    const auto n = probs.size(1);
    for (std::int64_t r = 0; r < rows; ++r) {
      double u = uniform(), acc = 0;
      std::int64_t a = n - 1;  // rounding may leave u above the last partial sum
      for (std::int64_t i = 0; i < n; ++i) {
        acc += p[r * n + i];
        if (u < acc) {
          a = i;
          break;
        }
      }
      out.push_back(static_cast<float>(a));
    }
    return out;
  }
  const auto mean = policy.contiguous();
  const auto std_dev = net.log_std().exp().contiguous();
  const float* m = mean.data_ptr<float>();
  const float* s = std_dev.data_ptr<float>();
  const auto d = mean.size(1);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t i = 0; i < d; ++i)
      out.push_back(static_cast<float>(m[r * d + i] + s[i] * normal()));
  return out;
}

std::vector<float> ActionSampler::greedy(const ActorCriticImpl& net, const torch::Tensor& policy) {
  const auto chosen =
      net.discrete() ? policy.argmax(-1).to(torch::kFloat).contiguous() : policy.contiguous();
  return net.env_actions({chosen.data_ptr<float>(), chosen.data_ptr<float>() + chosen.numel()});
}

std::vector<float> ActionSampler::epsilon_greedy(const torch::Tensor& q, double epsilon) {
  const auto best = q.argmax(-1).contiguous();
  const std::int64_t* b = best.data_ptr<std::int64_t>();
  const auto n = static_cast<std::uint64_t>(q.size(1));
  std::vector<float> out;
  for (std::int64_t r = 0; r < q.size(0); ++r)
    out.push_back(static_cast<float>(uniform() < epsilon ? rng_.below(n) : b[r]));
  return out;
}

namespace {

template <class Visit>
void for_each_parameter(torch::nn::Module& module, Visit visit) {
  for (auto& p : module.parameters()) visit(p);
}

std::vector<float> flatten(torch::nn::Module& module, bool gradients) {
  std::vector<float> out;
  out.reserve(parameter_count(module));
  for_each_parameter(module, [&](torch::Tensor& p) {
    torch::Tensor t = gradients ? p.grad() : p;
    if (!t.defined()) t = torch::zeros_like(p);
    t = t.detach().contiguous();
    out.insert(out.end(), t.data_ptr<float>(), t.data_ptr<float>() + t.numel());
  });
  return out;
}

void unflatten(torch::nn::Module& module, std::span<const float> flat, bool gradients) {
  DML_CHECK_EQ(flat.size(), parameter_count(module), "flat parameter count");
  torch::NoGradGuard no_grad;
  std::size_t at = 0;
  for_each_parameter(module, [&](torch::Tensor& p) {
    auto source = torch::from_blob(const_cast<float*>(flat.data() + at), p.sizes(), torch::kFloat);
    if (gradients) {
      if (!p.grad().defined()) p.mutable_grad() = torch::zeros_like(p);
      p.mutable_grad().copy_(source);
    } else {
      p.copy_(source);
    }
    at += static_cast<std::size_t>(p.numel());
  });
}

}  // namespace

std::size_t parameter_count(torch::nn::Module& module) {
  std::size_t n = 0;
  for_each_parameter(module, [&](torch::Tensor& p) { n += static_cast<std::size_t>(p.numel()); });
  return n;
}

std::uint64_t parameter_digest(torch::nn::Module& module) {
  const std::vector<float> flat = flatten(module, false);
  Fnv1a h;
  h.mix(flat.data(), flat.size() * sizeof(float));
  return h.value();
}

std::vector<float> flat_parameters(torch::nn::Module& module) { return flatten(module, false); }
std::vector<float> flat_gradients(torch::nn::Module& module) { return flatten(module, true); }
void load_flat_parameters(torch::nn::Module& module, std::span<const float> flat) {
  unflatten(module, flat, false);
}
void load_flat_gradients(torch::nn::Module& module, std::span<const float> flat) {
  unflatten(module, flat, true);
}

torch::Tensor as_tensor(std::span<const float> values, std::int64_t width) {
  DML_CHECK(width > 0 && values.size() % static_cast<std::size_t>(width) == 0,
            "values do not fill whole rows");
  return torch::from_blob(const_cast<float*>(values.data()),
                          {static_cast<std::int64_t>(values.size()) / width, width}, torch::kFloat)
      .clone();
}

}  // namespace distml::rl
