// The policies' densities and the algorithms' losses against their closed forms, written out
// here in float64: the diagonal Gaussian's log-probability and entropy, the tanh squash's change
// of variables, PPO's loss on a continuous policy with approx_kl and old_approx_kl, IMPALA's
// V-trace loss (value and gradient) and the double-DQN target.
//
// The networks run in float64 here, so each comparison is between two float64 evaluations of
// the same expression in different orders: a few units of roundoff u = 2^-53 ~ 1.1e-16 per
// operation on values of order one. Each tolerance below counts the operations it allows for.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <numbers>
#include <vector>

#include "distml/rl/algos/apex_agent.h"
#include "distml/rl/algos/impala_loss.h"
#include "distml/rl/algos/ppo_loss.h"
#include "distml/rl/policy.h"

namespace distml::rl {
namespace {

constexpr double kU = 0x1p-53;  // float64 unit roundoff
const double kLog2Pi = std::log(2 * std::numbers::pi);

// A Gaussian policy over 3 action dimensions with bounds [-1, 1], [-2, 2], [0, 4], in float64,
// its log standard deviations set to -1, 0 and 0.5.
ActorCritic gaussian_policy(bool squash) {
  torch::manual_seed(3);
  NetworkOptions options;
  options.squash = squash;
  ActorCritic net(Space::box({5, 0, 0, 0, 0}, {1, 1, 1, 1, 1}), Space::box({-1, -2, 0}, {1, 2, 4}),
                  options);
  net->to(torch::kDouble);
  torch::NoGradGuard no_grad;
  net->named_parameters()["log_std"].copy_(torch::tensor({-1.0, 0.0, 0.5}, torch::kDouble));
  return net;
}

// log N(u; mu, sigma) summed over the dimensions of a row, written out.
double gaussian_log_density(const std::vector<double>& u, const std::vector<double>& mu,
                            const std::vector<double>& log_sigma) {
  double sum = 0;
  for (std::size_t d = 0; d < u.size(); ++d) {
    const double z = (u[d] - mu[d]) / std::exp(log_sigma[d]);
    sum += -0.5 * z * z - log_sigma[d] - 0.5 * kLog2Pi;
  }
  return sum;
}

std::vector<double> row(const torch::Tensor& t, std::int64_t i) {
  const torch::Tensor r = t[i].contiguous().to(torch::kDouble);
  return {r.data_ptr<double>(), r.data_ptr<double>() + r.numel()};
}

const std::vector<double> kLogSigma = {-1.0, 0.0, 0.5};

// ---- The Gaussian policy ------------------------------------------------------------------------

TEST(GaussianPolicy, LogProbabilityIsTheDiagonalNormalDensity) {
  ActorCritic net = gaussian_policy(false);
  torch::NoGradGuard no_grad;
  const auto observations = torch::randn({6, 5}, torch::kDouble);
  const auto means = net->forward(observations).policy;
  // Actions up to 3 sigma away on either side, some outside the bounds (the density is the
  // Gaussian's: the clip to the bounds happens after sampling, as CleanRL's ClipAction).
  const auto actions = means + torch::randn({6, 3}, torch::kDouble) * 1.5 *
                                   torch::tensor(kLogSigma, torch::kDouble).exp();
  const auto log_p = net->log_prob(means, actions);
  ASSERT_EQ(log_p.sizes(), (std::vector<std::int64_t>{6}));
  for (std::int64_t i = 0; i < 6; ++i) {
    const double expected = gaussian_log_density(row(actions, i), row(means, i), kLogSigma);
    // Three dimensions of ~8 operations each on terms below ~10, then a sum of three.
    EXPECT_NEAR(log_p[i].item<double>(), expected, 64 * kU * (10 + std::abs(expected))) << i;
  }
}

TEST(GaussianPolicy, EntropyIsHalfLogOf2PiESigmaSquaredPerDimension) {
  ActorCritic net = gaussian_policy(false);
  torch::NoGradGuard no_grad;
  const auto means = net->forward(torch::randn({4, 5}, torch::kDouble)).policy;
  const auto entropy = net->entropy(means);
  double expected = 0;  // sum_d 0.5 log(2 pi e sigma_d^2)
  for (double ls : kLogSigma) expected += 0.5 * (1 + kLog2Pi) + ls;
  ASSERT_EQ(entropy.size(0), 4);
  for (std::int64_t i = 0; i < 4; ++i)
    EXPECT_NEAR(entropy[i].item<double>(), expected, 16 * kU * 4) << i;  // 3 sums of ~2
}

TEST(CategoricalPolicy, LogProbabilityAndEntropyFollowTheSoftmax) {
  torch::manual_seed(8);
  ActorCritic net(Space::box({0, 0, 0, 0}, {1, 1, 1, 1}), Space::discrete(3), NetworkOptions{});
  net->to(torch::kDouble);
  torch::NoGradGuard no_grad;
  const auto logits = torch::randn({5, 3}, torch::kDouble) * 2;
  const auto actions = torch::tensor({0, 1, 2, 2, 0}, torch::kDouble).reshape({5, 1});
  const auto log_p = net->log_prob(logits, actions);
  const auto entropy = net->entropy(logits);
  for (std::int64_t i = 0; i < 5; ++i) {
    const std::vector<double> z = row(logits, i);
    double norm = 0;
    for (double v : z) norm += std::exp(v);
    double h = 0;
    for (double v : z) h -= std::exp(v) / norm * (v - std::log(norm));
    const auto a = static_cast<std::size_t>(actions[i][0].item<double>());
    // Logits below ~8 in size: log-sum-exp and its differences within a few ulps of 10.
    EXPECT_NEAR(log_p[i].item<double>(), z[a] - std::log(norm), 64 * kU * 10) << i;
    EXPECT_NEAR(entropy[i].item<double>(), h, 64 * kU * 10) << i;
  }
}

// With network.squash the sample u is the Gaussian's and the action tanh(u) scaled into the
// bounds; the density of tanh(u) is N(u) / prod(1 - tanh(u_d)^2), and log(1 - tanh(u)^2) =
// -2 log cosh(u) = -2 (|u| - log 2 + log1p(exp(-2|u|))), a form with no cancellation, so the
// reference holds its accuracy out to |u| = 12, where 1 - tanh(u)^2 ~ 1.5e-10 (in float32 it
// rounds to 0 beyond |u| ~ 9).
TEST(GaussianPolicy, SquashedLogProbabilitySubtractsTheLogJacobianOfTanh) {
  ActorCritic net = gaussian_policy(true);
  torch::NoGradGuard no_grad;
  const auto means = net->forward(torch::randn({4, 5}, torch::kDouble)).policy;
  const auto samples = torch::tensor(
      {{0.0, 0.3, -0.7}, {2.5, -3.0, 1.0}, {-6.0, 9.5, 0.01}, {12.0, -12.0, 4.0}}, torch::kDouble);
  const auto log_p = net->log_prob(means, samples);
  for (std::int64_t i = 0; i < 4; ++i) {
    const std::vector<double> u = row(samples, i);
    double log_jacobian = 0;
    for (double v : u)
      log_jacobian += -2 * (std::abs(v) - std::log(2.0) + std::log1p(std::exp(-2 * std::abs(v))));
    const double expected = gaussian_log_density(u, row(means, i), kLogSigma) - log_jacobian;
    // Terms up to ~1000 ((12 - mu)^2 / (2 sigma^2) at sigma = e^-1): a few ulps of each.
    EXPECT_NEAR(log_p[i].item<double>(), expected, 64 * kU * (1000 + std::abs(expected))) << i;
  }
  // And the environment gets low + (tanh(u) + 1) (high - low) / 2, in float32.
  const std::vector<float> acts = net->env_actions({0.0f, 0.3f, -0.7f, 12.0f, -12.0f, 4.0f});
  const double low[3] = {-1, -2, 0}, high[3] = {1, 2, 4};
  const double u[6] = {0.0, 0.3, -0.7, 12.0, -12.0, 4.0};
  for (int k = 0; k < 6; ++k) {
    const int d = k % 3;
    const double expected = low[d] + (std::tanh(u[k]) + 1) * (high[d] - low[d]) / 2;
    // float32: the inputs are exact, each of ~5 operations rounds by 2^-24 relative to ~4.
    EXPECT_NEAR(acts[k], expected, 8 * 0x1p-24 * 4) << k;
  }
}

// ---- PPO on a continuous policy -----------------------------------------------------------------

// A batch of 12 samples for gaussian_policy(): old log-probabilities off from the current ones by
// delta_i (so log ratio = delta_i, ratios from e^-0.4 to e^0.4, inside and outside the clip),
// old values off by up to +-1 (inside and outside the value clip).
struct ContinuousCase {
  PpoBatch batch;
  std::vector<double> delta;
};
ContinuousCase continuous_case(ActorCriticImpl& net) {
  torch::manual_seed(21);
  const std::int64_t n = 12;
  ContinuousCase c;
  PpoBatch& b = c.batch;
  b.observations = torch::randn({n, 5}, torch::kDouble);
  torch::NoGradGuard no_grad;
  const auto out = net.forward(b.observations);
  b.actions = out.policy + torch::randn({n, 3}, torch::kDouble) * 0.5;
  const auto deltas = torch::linspace(-0.4, 0.4, n, torch::kDouble);
  b.log_probs = net.log_prob(out.policy, b.actions) - deltas;
  b.values = out.value + torch::linspace(1, -1, n, torch::kDouble);
  b.advantages = torch::randn({n}, torch::kDouble) * 3 + 1;
  b.returns = torch::randn({n}, torch::kDouble);
  for (std::int64_t i = 0; i < n; ++i) c.delta.push_back(deltas[i].item<double>());
  return c;
}

TEST(PpoLoss, ApproxKlIsTheMeanOfRatioMinusOneMinusLogRatio) {
  ActorCritic net = gaussian_policy(false);
  const ContinuousCase c = continuous_case(*net);
  AlgoConfig algo;
  algo.clip = 0.2;
  const PpoLoss loss = ppo_loss(*net, c.batch, torch::arange(12), algo);
  double kl = 0, old_kl = 0, clipped = 0;
  for (double d : c.delta) {  // log ratio = d
    kl += (std::exp(d) - 1 - d) / 12;
    old_kl += -d / 12;
    clipped += std::abs(std::exp(d) - 1) > 0.2 ? 1.0 / 12 : 0.0;
  }
  // The log ratio is recomputed as log_p - (log_p - delta): off from delta by a few ulps of
  // |log_p| < 20, so each term by ~2 ulps of 20; twelve terms of a mean.
  EXPECT_NEAR(loss.approx_kl, kl, 12 * 4 * kU * 20);
  EXPECT_NEAR(loss.old_approx_kl, old_kl, 12 * 4 * kU * 20);
  EXPECT_DOUBLE_EQ(loss.clip_fraction, clipped);
  EXPECT_GT(clipped, 0.2);
  EXPECT_LT(clipped, 0.9);
}

// The whole loss on a Gaussian policy, sample by sample from the closed-form density.
TEST(PpoLoss, ContinuousLossMatchesItsFormulaWithTheGaussianDensity) {
  ActorCritic net = gaussian_policy(false);
  const ContinuousCase c = continuous_case(*net);
  const PpoBatch& b = c.batch;
  AlgoConfig algo;
  algo.clip = 0.2;
  algo.value_clip = 0.3;
  algo.entropy = 0.01;
  algo.value_coef = 0.5;
  const PpoLoss loss = ppo_loss(*net, b, torch::arange(12), algo);

  torch::NoGradGuard no_grad;
  const auto out = net->forward(b.observations);
  const std::int64_t n = 12;
  double mean = 0, var = 0;
  for (std::int64_t i = 0; i < n; ++i) mean += b.advantages[i].item<double>() / n;
  for (std::int64_t i = 0; i < n; ++i)
    var += std::pow(b.advantages[i].item<double>() - mean, 2) / (n - 1);  // torch's std
  double policy = 0, value = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const double log_p = gaussian_log_density(row(b.actions, i), row(out.policy, i), kLogSigma);
    const double ratio = std::exp(log_p - b.log_probs[i].item<double>());
    const double a = (b.advantages[i].item<double>() - mean) / (std::sqrt(var) + 1e-8);
    policy -= std::min(ratio * a, std::clamp(ratio, 0.8, 1.2) * a) / n;
    const double v = out.value[i].item<double>(), old_v = b.values[i].item<double>();
    const double ret = b.returns[i].item<double>();
    const double v_clipped = old_v + std::clamp(v - old_v, -0.3, 0.3);
    value += 0.5 * std::max(std::pow(v - ret, 2), std::pow(v_clipped - ret, 2)) / n;
  }
  double entropy = 0;
  for (double ls : kLogSigma) entropy += 0.5 * (1 + kLog2Pi) + ls;
  // Terms of order 1-10 (normalised advantages up to ~3, ratios near 1, squared errors up to
  // ~10), each through ~20 operations, twelve of them summed: 1e-12 is ~40 ulps of 10 per term.
  EXPECT_NEAR(loss.policy, policy, 1e-12);
  EXPECT_NEAR(loss.value, value, 1e-12);
  EXPECT_NEAR(loss.entropy, entropy, 1e-13);
  EXPECT_NEAR(loss.total.item<double>(), policy + 0.5 * value - 0.01 * entropy, 2e-12);
}

// ---- IMPALA's loss
// --------------------------------------------------------------------------------

// T = 4 steps of K = 3 copies on a categorical policy, one episode end; behaviour log-probs off
// from the learner's so that some rho exceed the clip of 1.
TEST(VTraceLoss, ValueAndGradientMatchTheNaiveVTraceLoss) {
  torch::manual_seed(13);
  ActorCritic net(Space::box({0, 0, 0, 0}, {1, 1, 1, 1}), Space::discrete(2), NetworkOptions{});
  net->to(torch::kDouble);
  const std::int64_t T = 4, K = 3;
  Rollout b;
  b.observations = torch::randn({T + 1, K, 4}, torch::kDouble);
  b.actions = torch::randint(0, 2, {T, K, 1}).to(torch::kDouble);
  b.rewards = torch::randn({T, K}, torch::kDouble);
  b.discounts = torch::full({T, K}, 0.9, torch::kDouble);
  b.discounts[1][2] = 0;  // copy 2's episode ends at step 1
  {
    torch::NoGradGuard no_grad;
    const auto logits = net->forward(b.observations.slice(0, 0, T).reshape({T * K, 4})).policy;
    b.log_probs = net->log_prob(logits, b.actions.reshape({T * K, 1})).reshape({T, K}) +
                  torch::linspace(-0.6, 0.6, T * K, torch::kDouble).reshape({T, K});
  }
  RlConfig config;
  config.algo.value_coef = 0.5;
  config.algo.entropy = 0.01;
  config.impala.clip_rho = 1.0;
  config.impala.clip_c = 0.9;
  config.impala.clip_pg_rho = 1.1;
  const VTraceLoss loss = vtrace_loss(*net, b, config);
  net->zero_grad();
  loss.total.backward();
  std::vector<torch::Tensor> grads;
  for (const auto& p : net->parameters()) grads.push_back(p.grad().clone());

  // The naive loss: targets from the sums of the paper's definition (eq. 1), as constants.
  const auto out = net->forward(b.observations.slice(0, 0, T).reshape({T * K, 4}));
  const auto log_softmax = torch::log_softmax(out.policy, -1).reshape({T, K, 2});
  const auto values = out.value.reshape({T, K});
  std::vector<std::vector<double>> v(T + 1, std::vector<double>(K)), V(T + 1, v[0]);
  std::vector<std::vector<double>> rho(T, v[0]);
  {
    torch::NoGradGuard no_grad;
    const auto boot = net->forward(b.observations[T]).value;
    for (std::int64_t k = 0; k < K; ++k) {
      V[T][k] = boot[k].item<double>();
      for (std::int64_t t = 0; t < T; ++t) {
        V[t][k] = values[t][k].item<double>();
        const auto a = static_cast<std::int64_t>(b.actions[t][k][0].item<double>());
        rho[t][k] =
            std::exp(log_softmax[t][k][a].item<double>() - b.log_probs[t][k].item<double>());
      }
    }
  }
  auto gamma = [&](std::int64_t t, std::int64_t k) { return b.discounts[t][k].item<double>(); };
  auto r = [&](std::int64_t t, std::int64_t k) { return b.rewards[t][k].item<double>(); };
  for (std::int64_t k = 0; k < K; ++k) {
    v[T][k] = V[T][k];
    for (std::int64_t s = 0; s < T; ++s) {  // v_s = V_s + sum_t (prod_{i<t} gamma_i c_i) delta_t
      double sum = 0, trace = 1;
      for (std::int64_t t = s; t < T; ++t) {
        const double delta =
            std::min(1.0, rho[t][k]) * (r(t, k) + gamma(t, k) * V[t + 1][k] - V[t][k]);
        sum += trace * delta;
        trace *= gamma(t, k) * std::min(0.9, rho[t][k]);
      }
      v[s][k] = V[s][k] + sum;
    }
  }
  torch::Tensor policy = torch::zeros({}, torch::kDouble), baseline = policy.clone();
  for (std::int64_t t = 0; t < T; ++t)
    for (std::int64_t k = 0; k < K; ++k) {
      const auto a = static_cast<std::int64_t>(b.actions[t][k][0].item<double>());
      const double adv = std::min(1.1, rho[t][k]) * (r(t, k) + gamma(t, k) * v[t + 1][k] - V[t][k]);
      policy = policy - log_softmax[t][k][a] * adv / (T * K);
      baseline = baseline + 0.5 * (v[t][k] - values[t][k]).pow(2) / (T * K);
    }
  const auto p = torch::softmax(out.policy, -1);
  const auto entropy = -(p * p.log()).sum(-1).mean();
  const auto total = policy + 0.5 * baseline - 0.01 * entropy;
  net->zero_grad();
  total.backward();

  // Twelve terms of order 1, each from ~4 nested sums of order 1: 1e-13 is ~100 ulps of each.
  EXPECT_NEAR(loss.policy, policy.item<double>(), 1e-13);
  EXPECT_NEAR(loss.baseline, baseline.item<double>(), 1e-13);
  EXPECT_NEAR(loss.entropy, entropy.item<double>(), 1e-14);
  EXPECT_NEAR(loss.total.item<double>(), total.item<double>(), 1e-13);
  // The gradients: the same sums back-propagated through a [64, 64] MLP, each element a sum of
  // at most 12 x 64 products of factors of order 1 (orthogonal weights, tanh'): 1e-12 is ~10
  // ulps of such a sum's magnitude. The targets carry no gradient on either side; had they one,
  // the baseline's gradient would differ by terms of order 1.
  const auto params = net->parameters();
  for (std::size_t i = 0; i < params.size(); ++i) {
    const double diff = (grads[i] - params[i].grad()).abs().max().item<double>();
    EXPECT_LE(diff, 1e-12) << "parameter " << i;
  }
  EXPECT_GT(loss.mean_rho, 0);
}

// ---- The double-DQN target ----------------------------------------------------------------------

// y = r + discount Q_target(s', argmax_a Q_online(s', a)): the online network chooses, the target
// network values. The two networks are different enough here that some rows' choices differ
// from the target network's own argmax (where plain DQN's max would give another number).
TEST(DoubleDqn, TargetValuesTheOnlineArgmaxWithTheTargetNetwork) {
  const Space observation = Space::box({0, 0, 0}, {1, 1, 1});
  torch::manual_seed(31);
  QNetwork online(observation, Space::discrete(4), NetworkOptions{});
  torch::manual_seed(32);
  QNetwork target(observation, Space::discrete(4), NetworkOptions{});
  online->to(torch::kDouble);
  target->to(torch::kDouble);
  const std::int64_t n = 32;
  const auto next = torch::randn({n, 3}, torch::kDouble);
  const auto rewards = torch::randn({n}, torch::kDouble);
  const auto discounts = torch::where(torch::arange(n) % 5 == 0, torch::zeros({n}, torch::kDouble),
                                      torch::full({n}, 0.97, torch::kDouble));
  const auto y = double_dqn_target(*online, *target, rewards, discounts, next);
  EXPECT_FALSE(y.requires_grad());
  torch::NoGradGuard no_grad;
  const auto q_online = online->forward(next), q_target = target->forward(next);
  int differs = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    std::int64_t best = 0, target_best = 0;
    for (std::int64_t a = 1; a < 4; ++a) {
      if (q_online[i][a].item<double>() > q_online[i][best].item<double>()) best = a;
      if (q_target[i][a].item<double>() > q_target[i][target_best].item<double>()) target_best = a;
    }
    differs += best != target_best && discounts[i].item<double>() > 0;
    const double expected =
        rewards[i].item<double>() + discounts[i].item<double>() * q_target[i][best].item<double>();
    // One product and one sum on values of order 1.
    EXPECT_NEAR(y[i].item<double>(), expected, 4 * kU * 4) << i;
  }
  EXPECT_GE(differs, 3) << "the case must tell double DQN from DQN";
}

}  // namespace
}  // namespace distml::rl
