// The pieces of the algorithms against their formulas written out here: the truncation
// bootstrap of a rollout, a rollout with environment workers against one without, PPO's clipped
// losses, the ranks of PPO and A2C staying identical, the Ape-X actors' exploration, Ape-X
// DPG's critic target, the Ape-X messages, A3C's policy lag, and the config rules of a2c and
// a3c.
#include "distml/rl/algos/algorithm.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>

#include <cmath>
#include <mutex>

#include "distml/comm/local/local_world.h"
#include "distml/core/error.h"
#include "distml/rl/algos/apex_agent.h"
#include "distml/rl/algos/apex_messages.h"
#include "distml/rl/algos/ppo_loss.h"
#include "distml/rl/dpg_networks.h"
#include "distml/rl/nstep.h"
#include "distml/rl/rollout.h"

namespace distml::rl {
namespace {

using ::testing::HasSubstr;

// ---- The rollout ------------------------------------------------------------------------------

struct Replayed {
  std::vector<float> rewards, final_observation;
  std::vector<std::uint8_t> terminated, truncated;
};

// Steps a second copy of `name` (same seed) through the rollout's environment actions: the raw
// rewards and episode ends the rollout saw, copy 0 only.
Replayed replay(const std::string& name, std::uint64_t seed, ActorCriticImpl& net,
                const Rollout& r) {
  VectorEnv envs(name, 1, seed);
  Replayed out;
  const auto actions = r.actions.contiguous();
  const std::int64_t width = actions.size(2);
  for (std::int64_t t = 0; t < actions.size(0); ++t) {
    const float* a = actions.data_ptr<float>() + t * width;
    const VectorEnv::Step& s = envs.step(net.env_actions({a, a + width}));
    out.rewards.push_back(s.rewards[0]);
    out.terminated.push_back(s.terminated[0]);
    out.truncated.push_back(s.truncated[0]);
    if (s.truncated[0]) out.final_observation = s.final_observations;
  }
  return out;
}

ActorCritic network_for(const std::string& name) {
  auto env = make_env(name);
  torch::manual_seed(5);
  return ActorCritic(env->observation_space(), env->action_space(), NetworkOptions{});
}

// Pendulum is cut by its time limit at step 200: that step's reward gets gamma V(final
// observation) added and its discount is 0; every other step keeps its reward and gamma.
TEST(CollectRollout, ATruncatedStepAddsTheDiscountedValueOfItsFinalObservation) {
  ActorCritic net = network_for("pendulum");
  VectorEnv envs("pendulum", 1, 42);
  Normalizer off(NormalizeConfig{}, 3, 1, 0.9);
  ActionSampler sampler(7);
  const double gamma = 0.9;
  const Rollout r = collect_rollout(*net, envs, off, sampler, 200, gamma);
  const Replayed ref = replay("pendulum", 42, *net, r);
  ASSERT_TRUE(ref.truncated[199] && !ref.terminated[199]);
  torch::NoGradGuard no_grad;
  const float v_final = net->forward(as_tensor(ref.final_observation, 3)).value.item<float>();
  // The rollout adds gamma V in double and stores a float: one float rounding of the sum.
  const double expected = ref.rewards[199] + gamma * v_final;
  EXPECT_NEAR(r.rewards[199][0].item<float>(), expected, 1e-6 * std::abs(expected));
  EXPECT_EQ(r.discounts[199][0].item<float>(), 0.0f);
  for (int t = 0; t < 199; ++t) {
    EXPECT_EQ(r.rewards[t][0].item<float>(), ref.rewards[t]) << "step " << t;
    EXPECT_EQ(r.discounts[t][0].item<float>(), static_cast<float>(gamma)) << "step " << t;
  }
}

// A pole that falls terminates: no bootstrap, the raw reward and discount 0.
TEST(CollectRollout, ATerminatedStepKeepsItsRewardAndCutsTheReturn) {
  ActorCritic net = network_for("cartpole");
  VectorEnv envs("cartpole", 1, 3);
  Normalizer off(NormalizeConfig{}, 4, 1, 0.99);
  ActionSampler sampler(11);
  const Rollout r = collect_rollout(*net, envs, off, sampler, 120, 0.99);
  const Replayed ref = replay("cartpole", 3, *net, r);
  int ends = 0;
  for (int t = 0; t < 120; ++t) {
    EXPECT_EQ(r.rewards[t][0].item<float>(), ref.rewards[t]) << "step " << t;
    EXPECT_EQ(r.discounts[t][0].item<float>(), ref.terminated[t] ? 0.0f : 0.99f) << "step " << t;
    ends += ref.terminated[t];
  }
  EXPECT_GE(ends, 1) << "a random policy keeps the pole up for 120 steps?";
}

// A bound on the float32 rounding error of the MLP `prefix` ("actor" or "critic": Linear layers
// with tanh between) on inputs x [N, in], however its sums are ordered: each output of a layer
// is a sum of n = inputs + 1 terms (products and the bias), off by at most gamma_n = n u / (1 -
// n u) times the sum of their magnitudes (Higham, Accuracy and Stability, Lemma 3.1; an FMA only
// removes roundings), plus the error it inherits, |W| times the input's; tanh is 1-Lipschitz
// and rounds once more (a few ulps of a value within +-1: 4u). Evaluated in double: [N, out].
torch::Tensor rounding_bound(ActorCriticImpl& net, const std::string& prefix, torch::Tensor x) {
  constexpr double u = 0x1p-24;  // float32 unit roundoff
  std::vector<torch::Tensor> weights, biases;
  for (const auto& p : net.named_parameters())
    if (p.key().rfind(prefix + ".", 0) == 0)
      (p.key().ends_with(".weight") ? weights : biases).push_back(p.value().to(torch::kDouble));
  torch::Tensor h = x.to(torch::kDouble), error = torch::zeros_like(h);
  for (std::size_t l = 0; l < weights.size(); ++l) {
    const torch::Tensor w = weights[l].t(), b = biases[l];
    const double n = static_cast<double>(w.size(0) + 1), gamma = n * u / (1 - n * u);
    error = error.matmul(w.abs()) + gamma * (h.abs().matmul(w.abs()) + b.abs());
    h = h.matmul(w) + b;
    if (l + 1 < weights.size()) {
      h = h.tanh();
      error = error + 4 * u;
    }
  }
  return error;
}

// With two environment workers the copies step in two groups, each while the policy acts for
// the other (double buffering). The rollout must be the one a single thread collects: the same
// actions (the sampler draws row by row in the same order), so the same observations, rewards,
// bootstraps (acrobot's 500-step limit falls in the second rollout) and episodes.
TEST(CollectRollout, TwoWorkersCollectTheRolloutOfOne) {
  ActorCritic net = network_for("acrobot");
  VectorEnv one("acrobot", 6, 8), two("acrobot", 6, 8, {}, 2);
  ASSERT_EQ(two.groups(), 2);
  Normalizer off_one(NormalizeConfig{}, 6, 6, 0.99), off_two(NormalizeConfig{}, 6, 6, 0.99);
  ActionSampler sampler_one(3), sampler_two(3);
  for (int rollout = 0; rollout < 2; ++rollout) {
    const Rollout a = collect_rollout(*net, one, off_one, sampler_one, 300, 0.99);
    const Rollout b = collect_rollout(*net, two, off_two, sampler_two, 300, 0.99);
    EXPECT_TRUE(torch::equal(b.actions, a.actions)) << "rollout " << rollout;
    EXPECT_TRUE(torch::equal(b.observations, a.observations));
    EXPECT_TRUE(torch::equal(b.rewards, a.rewards));
    EXPECT_TRUE(torch::equal(b.discounts, a.discounts));
    EXPECT_EQ(b.finished_episodes, a.finished_episodes);
    EXPECT_EQ(b.finished_return_sum, a.finished_return_sum);
    // The network sees 3 rows at a time instead of 6, and a BLAS may order a GEMM's sums by its
    // row count. Each side is within rounding_bound of the exact value, so they differ by at
    // most twice that. A log-probability z_a - logsumexp(z) moves by at most twice the largest
    // logit error (its gradient's 1-norm is at most 2), plus the rounding of log_softmax itself
    // on each side (a few ulps of values within 1 + |log p|: 8u each). (The same few ulps could
    // move a sampled action only if a uniform draw fell within them of a probability boundary.)
    const auto seen = a.observations.slice(0, 0, 300).reshape({-1, 6});
    const auto value_bound = 2 * rounding_bound(*net, "critic", seen).reshape({300, 6});
    EXPECT_TRUE(((b.values - a.values).abs().to(torch::kDouble) <= value_bound).all().item<bool>())
        << "largest value difference " << (b.values - a.values).abs().max().item<float>();
    const auto logit_error = std::get<0>(rounding_bound(*net, "actor", seen).max(1));
    const auto log_prob_bound = 4 * logit_error.reshape({300, 6}) +
                                16 * 0x1p-24 * (1 + a.log_probs.abs().to(torch::kDouble));
    EXPECT_TRUE(
        ((b.log_probs - a.log_probs).abs().to(torch::kDouble) <= log_prob_bound).all().item<bool>())
        << "largest log-probability difference "
        << (b.log_probs - a.log_probs).abs().max().item<float>();
  }
  EXPECT_EQ(two.steps(), one.steps());
  EXPECT_GT(one.steps(), 3000) << "both rollouts stepped every copy";
}

// PPO's first minibatch must see ratio 1: the rollout keeps the observations as the network saw
// them (normalised with the statistics of that step, which move during the rollout), so the
// log-probabilities recomputed from the stored rows at the update are the stored ones, up to the
// rounding of a forward pass over another number of rows. The Gaussian's log-density moves by
// sum_d |z_d| / sigma_d times a mean's error, each mean within rounding_bound of its exact value
// on either side, plus a few ulps of the density itself.
TEST(CollectRollout, StoredLogProbabilitiesAreThoseOfTheStoredObservations) {
  ActorCritic net = network_for("pendulum");
  VectorEnv envs("pendulum", 4, 21);
  NormalizeConfig on;
  on.observations = on.rewards = true;
  Normalizer normalizer(on, 3, 4, 0.99);
  ActionSampler sampler(5);
  for (int rollout = 0; rollout < 2; ++rollout) {
    const Rollout r = collect_rollout(*net, envs, normalizer, sampler, 64, 0.99);
    torch::NoGradGuard no_grad;
    const auto seen = r.observations.slice(0, 0, 64).reshape({256, 3});
    const auto actions = r.actions.reshape({256, 1});
    const auto out = net->forward(seen);
    const auto again = net->log_prob(out.policy, actions);
    const auto sigma = net->log_std().exp().to(torch::kDouble);
    const auto z = ((actions - out.policy).to(torch::kDouble) / sigma).abs();
    const auto mean_error = 2 * rounding_bound(*net, "actor", seen);
    const auto bound =
        (z / sigma * mean_error).sum(1) + 16 * 0x1p-24 * (1 + again.abs().to(torch::kDouble));
    const auto diff = (again - r.log_probs.reshape({256})).abs().to(torch::kDouble);
    EXPECT_TRUE((diff <= bound).all().item<bool>())
        << "rollout " << rollout << ": largest difference " << diff.max().item<double>();
  }
}

// ---- PPO's loss -------------------------------------------------------------------------------

// The loss of ppo_loss.h computed sample by sample in double from the network's outputs.
struct ByHand {
  double policy = 0, value = 0, total = 0, clip_fraction = 0;
};
ByHand ppo_by_hand(ActorCriticImpl& net, const PpoBatch& b, const AlgoConfig& algo) {
  torch::NoGradGuard no_grad;
  const auto out = net.forward(b.observations);
  const auto log_p = net.log_prob(out.policy, b.actions);
  const auto entropy = net.entropy(out.policy).mean().item<double>();
  const std::int64_t n = b.observations.size(0);
  std::vector<double> adv(n);
  double mean = 0, var = 0;
  for (std::int64_t i = 0; i < n; ++i) mean += (adv[i] = b.advantages[i].item<double>()) / n;
  for (double a : adv) var += (a - mean) * (a - mean) / (n - 1);  // torch's std: unbiased
  ByHand h;
  for (std::int64_t i = 0; i < n; ++i) {
    const double a = (adv[i] - mean) / (std::sqrt(var) + 1e-8);
    const double ratio = std::exp(log_p[i].item<double>() - b.log_probs[i].item<double>());
    const double clipped = std::clamp(ratio, 1 - algo.clip, 1 + algo.clip);
    h.policy -= std::min(ratio * a, clipped * a) / n;
    h.clip_fraction += (std::abs(ratio - 1) > algo.clip) / static_cast<double>(n);
    const double v = out.value[i].item<double>(), old_v = b.values[i].item<double>();
    const double ret = b.returns[i].item<double>();
    const double v_clipped = old_v + std::clamp(v - old_v, -algo.value_clip, algo.value_clip);
    h.value += 0.5 * std::max((v - ret) * (v - ret), (v_clipped - ret) * (v_clipped - ret)) / n;
  }
  h.total = h.policy + algo.value_coef * h.value - algo.entropy * entropy;
  return h;
}

TEST(PpoLoss, ClippedSurrogateAndClippedValueLossMatchTheirFormulas) {
  ActorCritic net = network_for("cartpole");
  torch::manual_seed(9);
  const std::int64_t n = 16;
  PpoBatch b;
  b.observations = torch::randn({n, 4});
  b.actions = torch::randint(0, 2, {n, 1}).to(torch::kFloat);
  {
    torch::NoGradGuard no_grad;
    const auto out = net->forward(b.observations);
    // Old log-probabilities off by up to +-0.5: ratios from 0.6 to 1.6, inside and outside
    // [0.8, 1.2]; old values off by up to +-1, inside and outside the value clip.
    b.log_probs = net->log_prob(out.policy, b.actions) + torch::linspace(-0.5, 0.5, n);
    b.values = out.value + torch::linspace(1, -1, n);
  }
  b.advantages = torch::randn({n});
  b.returns = torch::randn({n});
  AlgoConfig algo;
  algo.clip = 0.2;
  algo.value_clip = 0.3;
  algo.entropy = 0.01;
  const PpoLoss loss = ppo_loss(*net, b, torch::arange(n), algo);
  const ByHand h = ppo_by_hand(*net, b, algo);
  // float32 against double over 16 samples of O(1) terms: each float term carries a relative
  // error of a few 2^-24, the sums 16 of them; 1e-5 absolute covers that with a margin.
  EXPECT_NEAR(loss.policy, h.policy, 1e-5);
  EXPECT_NEAR(loss.value, h.value, 1e-5);
  EXPECT_NEAR(loss.total.item<double>(), h.total, 1e-5);
  EXPECT_DOUBLE_EQ(loss.clip_fraction, h.clip_fraction);
  EXPECT_GT(h.clip_fraction, 0.2) << "the case must clip some samples";
  EXPECT_LT(h.clip_fraction, 0.9) << "and leave some unclipped";
}

// Without clipping the loss is -mean(ratio A) (A2C's gradient at ratio 1), and without a value
// clip the value loss is the plain half squared error.
TEST(PpoLoss, WithoutClippingIsThePolicyGradientLoss) {
  ActorCritic net = network_for("cartpole");
  torch::manual_seed(4);
  const std::int64_t n = 8;
  PpoBatch b;
  b.observations = torch::randn({n, 4});
  b.actions = torch::randint(0, 2, {n, 1}).to(torch::kFloat);
  {
    torch::NoGradGuard no_grad;
    b.log_probs = net->log_prob(net->forward(b.observations).policy, b.actions);
    b.values = net->forward(b.observations).value;
  }
  b.advantages = torch::randn({n});
  b.returns = torch::randn({n});
  AlgoConfig algo;
  algo.clip = 0;
  algo.normalize_advantages = false;
  const PpoLoss loss = ppo_loss(*net, b, torch::arange(n), algo);
  torch::NoGradGuard no_grad;
  const auto v = net->forward(b.observations).value;
  EXPECT_NEAR(loss.policy, -b.advantages.mean().item<double>(), 1e-6);  // ratio 1 exactly
  EXPECT_NEAR(loss.value, 0.5 * (v - b.returns).pow(2).mean().item<double>(), 1e-6);
  EXPECT_EQ(loss.clip_fraction, 0);
}

// ---- PPO and A2C ranks ------------------------------------------------------------------------

// Every rank starts from the same network and applies the same averaged gradient: after a run
// their parameters are equal bit for bit, at 2 and 3 ranks, for PPO (several minibatches and
// passes, normalisation on) and A2C.
TEST(PolicyGradient, RanksHoldIdenticalParametersAfterARun) {
  for (const std::string algo : {"ppo", "a2c"})
    for (int ranks : {2, 3}) {
      RlConfig c = load_rl_config("", {"algo.name=" + algo, "env.name=pendulum",
                                       "env.copies=2", "algo.unroll=32", "run.env_steps=1500",
                                       "run.eval_episodes=1", "run.log_every=0"});
      ASSERT_TRUE(c.normalize.observations);
      std::mutex mutex;
      std::vector<std::uint64_t> digests;
      comm::local::run_ranks(ranks, {}, [&](comm::Communicator& comm) {
        const RunResult r = run_algorithm(c, comm, RunHooks{});
        std::lock_guard lock(mutex);
        digests.push_back(r.parameter_digest);
      });
      ASSERT_EQ(digests.size(), static_cast<std::size_t>(ranks));
      for (std::uint64_t d : digests) EXPECT_EQ(d, digests[0]) << algo << " at " << ranks;
      EXPECT_NE(digests[0], 0u);
    }
}

// ---- Config rules -------------------------------------------------------------------------------

TEST(RlConfig, A2cAndA3cAreOnePassOneMinibatchUnclippedNStep) {
  for (const std::string algo : {"a2c", "a3c"}) {
    const RlConfig c = load_rl_config("", {"algo.name=" + algo});
    EXPECT_EQ(c.algo.epochs, 1);
    EXPECT_EQ(c.algo.minibatches, 1);
    EXPECT_EQ(c.algo.clip, 0);
    EXPECT_EQ(c.algo.lambda, 1);
    for (const std::string bad : {"algo.epochs=4", "algo.minibatches=2", "algo.clip=0.2",
                                  "algo.lambda=0.95"}) {
      try {
        load_rl_config("", {"algo.name=" + algo, bad});
        ADD_FAILURE() << algo << " took " << bad;
      } catch (const ConfigError& e) {
        EXPECT_THAT(e.what(), HasSubstr(algo + " is one pass over one minibatch"));
        EXPECT_THAT(e.what(), HasSubstr(bad.substr(0, bad.find('='))));
        EXPECT_THAT(e.what(), HasSubstr("--set " + bad));  // where the value came from
      }
    }
  }
  EXPECT_EQ(load_rl_config("", {"algo.name=ppo"}).algo.epochs, 4);  // PPO keeps its own
}

// --print-config's text, as a config file, gives the same config: a run without a target
// prints run.target_return = nan, which reads back as no target (a number there would turn a
// target on, and with run.eval_every = 0 be refused).
TEST(RlConfig, TheCanonicalTextReadsBackAsItself) {
  for (const std::vector<std::string>& sets :
       {std::vector<std::string>{"algo.name=ppo"},
        std::vector<std::string>{"algo.name=a3c", "run.target_return=100", "run.eval_every=5"}}) {
    const std::string text = canonical_text(load_rl_config("", sets));
    const std::string path = ::testing::TempDir() + "/canonical.toml";
    std::ofstream(path) << text;
    EXPECT_EQ(canonical_text(load_rl_config(path, {})), text);
  }
  EXPECT_FALSE(load_rl_config("", {"run.target_return=nan"}).run.has_target);
}

// A3C and IMPALA have defaults of their own (docs/rl.md); a key given keeps its value. The
// learning rates are set from the same literals they are compared with: equal exactly, so
// DOUBLE_EQ's 4 ulps are no allowance.
TEST(RlConfig, A3cAndImpalaDefaultsAreTheirOwnAndGivenKeysWin) {
  const RlConfig a3c = load_rl_config("", {"algo.name=a3c", "env.name=mountaincar"});
  EXPECT_EQ(a3c.algo.unroll, 5);
  EXPECT_DOUBLE_EQ(a3c.optim.lr, 7e-4);
  EXPECT_DOUBLE_EQ(a3c.algo.entropy, 0.01);
  EXPECT_TRUE(a3c.algo.anneal_lr);
  EXPECT_TRUE(a3c.normalize.observations && a3c.normalize.rewards);
  const RlConfig impala = load_rl_config("", {"algo.name=impala", "env.name=acrobot"});
  EXPECT_EQ(impala.algo.unroll, 20);
  EXPECT_DOUBLE_EQ(impala.optim.lr, 1e-3);
  EXPECT_DOUBLE_EQ(impala.algo.entropy, 0.001);
  EXPECT_EQ(impala.impala.batch_unrolls, 2);
  EXPECT_EQ(impala.impala.max_unrolls_ahead, 4);
  EXPECT_FALSE(impala.algo.anneal_lr);  // measured no better annealed (docs/benchmarks.md)
  EXPECT_TRUE(impala.normalize.observations);
  const RlConfig given = load_rl_config(
      "", {"algo.name=impala", "algo.unroll=50", "optim.lr=0.01", "normalize.rewards=false"});
  EXPECT_EQ(given.algo.unroll, 50);
  EXPECT_DOUBLE_EQ(given.optim.lr, 0.01);
  EXPECT_FALSE(given.normalize.rewards);
  const RlConfig ppo = load_rl_config("", {"algo.name=ppo"});  // PPO keeps the general ones
  EXPECT_EQ(ppo.algo.unroll, 128);
  EXPECT_FALSE(ppo.algo.anneal_lr);
}

TEST(RlConfig, NormalisationDefaultsOnForContinuousActionsAndA3cAndImpala) {
  EXPECT_TRUE(load_rl_config("", {"env.name=pendulum"}).normalize.observations);
  EXPECT_TRUE(load_rl_config("", {"env.name=pendulum"}).normalize.rewards);
  EXPECT_FALSE(load_rl_config("", {"env.name=cartpole"}).normalize.observations);
  EXPECT_FALSE(load_rl_config("", {"algo.name=a2c", "env.name=cartpole"}).normalize.rewards);
  EXPECT_TRUE(load_rl_config("", {"algo.name=a3c", "env.name=cartpole"}).normalize.rewards);
  EXPECT_FALSE(load_rl_config("", {"env.name=pendulum", "normalize.rewards=false"})
                   .normalize.rewards);
  EXPECT_FALSE(load_rl_config("", {"algo.name=apex_dpg", "env.name=pendulum"})
                   .normalize.observations);
  EXPECT_THROW(load_rl_config("", {"algo.name=apex_dpg", "env.name=pendulum",
                                   "normalize.observations=true"}),
               ConfigError);
  EXPECT_THROW(load_rl_config("", {"algo.name=apex_dpg", "env.name=cartpole"}), ConfigError);
}

// ---- Ape-X --------------------------------------------------------------------------------------

TEST(ApexExploration, ActorEpsilonsAndNoiseScalesFollowTheirFormulas) {
  ApexConfig c;
  c.epsilon = 0.4;
  c.epsilon_alpha = 7;
  c.noise = 0.3;
  c.noise_min = 0.05;
  EXPECT_DOUBLE_EQ(actor_epsilon(c, 0, 1), 0.4);
  for (int i = 0; i < 4; ++i)  // epsilon^(1 + alpha i / (N - 1)), Horgan et al. 2018
    EXPECT_DOUBLE_EQ(actor_epsilon(c, i, 4), std::pow(0.4, 1 + 7.0 * i / 3));
  EXPECT_DOUBLE_EQ(actor_noise(c, 0, 1), 0.3);
  EXPECT_DOUBLE_EQ(actor_noise(c, 0, 3), 0.3);
  EXPECT_NEAR(actor_noise(c, 1, 3), std::sqrt(0.3 * 0.05), 1e-15);  // geometric middle
  EXPECT_NEAR(actor_noise(c, 2, 3), 0.05, 1e-15);
}

// n = 3, gamma = 0.9 over five steps, the fifth terminating: the first transition's target is
// r0 + g r1 + g^2 r2 + g^3 Q'(s3, mu'(s3)); the last ones are cut at the end without bootstrap.
TEST(ApexDpg, CriticTargetEqualsTheNStepTargetWrittenOut) {
  auto env = make_env("pendulum");
  torch::manual_seed(2);
  DpgNetworks target(env->observation_space(), env->action_space(), NetworkOptions{});
  const double g = 0.9;
  NStepWindow window(3, g);
  std::vector<Transition> out;
  std::vector<std::vector<float>> s = {
      {1, 0, 0.1f}, {0.9f, 0.1f, 0.2f}, {0.8f, 0.3f, 0.5f}, {0.5f, 0.7f, 1}, {0, 1, 2}, {-1, 0, 3}};
  const std::vector<float> r = {-1, -2, -0.5f, -3, -0.25f};
  for (int t = 0; t < 5; ++t)
    window.add(s[t], std::vector<float>{0.5f * t - 1}, r[t], t == 4, t == 4, s[t + 1], out);
  ASSERT_EQ(out.size(), 5u);
  const TransitionBatch b = TransitionBatch::of(out, {3, 1});
  const auto y = dpg_critic_target(*target, b.rewards, b.discounts, b.next_observations);
  torch::NoGradGuard no_grad;
  auto q_target = [&](const std::vector<float>& state) {
    const auto o = torch::tensor(state).reshape({1, 3});
    return target->q(o, target->act(o)).item<double>();
  };
  const double expected[5] = {
      r[0] + g * r[1] + g * g * r[2] + g * g * g * q_target(s[3]),
      r[1] + g * r[2] + g * g * r[3] + g * g * g * q_target(s[4]),
      r[2] + g * r[3] + g * g * r[4],  // the episode ends inside the window: no bootstrap
      r[3] + g * r[4],
      r[4]};
  // Float32 sums of five O(1) terms against double: a few 2^-24 relative each.
  for (int i = 0; i < 5; ++i) EXPECT_NEAR(y[i].item<double>(), expected[i], 1e-5) << i;
}

TEST(ApexMessages, EveryMessageReadsBackWhatWasPacked) {
  const apex::Layout layout{2, 1};
  apex::Transitions t;
  t.items = {{{1, 2}, {0}, 1.5f, 0.9f, {3, 4}}, {{5, 6}, {1}, -1, 0, {7, 8}}};
  t.priorities = {0.5f, 2};
  t.env_steps = 17;
  t.episodes = {12.5, 2};
  const Message tm = t.pack(layout);
  EXPECT_EQ(tm.extra, 17u);
  EXPECT_NO_THROW(apex::Transitions::check(layout, 2)(tm.kind, tm.payload.size()));
  EXPECT_THROW(apex::Transitions::check(layout, 1)(tm.kind, tm.payload.size()), CommError);
  const apex::Transitions t2 = apex::Transitions::unpack(tm, layout);
  ASSERT_EQ(t2.items.size(), 2u);
  EXPECT_EQ(t2.items[1].next_observation, (std::vector<float>{7, 8}));
  EXPECT_EQ(t2.items[0].reward, 1.5f);
  EXPECT_EQ(t2.priorities, t.priorities);
  EXPECT_EQ(t2.episodes.count, 2);
  EXPECT_EQ(t2.episodes.return_sum, 12.5);

  apex::Sample s;
  s.batch.indices = {(1ULL << 40) + 3, 7};
  s.batch.weights = {1, 0.25f};
  s.batch.observations = {1, 2, 3, 4};
  s.batch.actions = {0, 1};
  s.batch.rewards = {0.5f, -0.5f};
  s.batch.discounts = {0.99f, 0};
  s.batch.next_observations = {5, 6, 7, 8};
  s.replay_size = 12345;
  s.env_steps = 678;
  const Message sm = s.pack(layout);
  EXPECT_EQ(sm.payload.size(), apex::Sample::floats(layout, 2));
  const apex::Sample s2 = apex::Sample::unpack(sm, layout);
  EXPECT_EQ(s2.batch.indices, s.batch.indices);  // 64-bit indices survive as bit patterns
  EXPECT_EQ(s2.batch.next_observations, s.batch.next_observations);
  EXPECT_EQ(s2.replay_size, 12345u);
  EXPECT_EQ(s2.env_steps, 678);

  const apex::Priorities p{{(1ULL << 50) + 1, 2}, {0.125f, 3}};
  const apex::Priorities p2 = apex::Priorities::unpack(p.pack());
  EXPECT_EQ(p2.indices, p.indices);
  EXPECT_EQ(p2.priorities, p.priorities);
  EXPECT_EQ(apex::SampleRequest::unpack(apex::SampleRequest{0.5}.pack()).beta, 0.5);

  t.priorities[1] = -1;  // a diverged actor
  EXPECT_THROW(apex::Transitions::unpack(t.pack(layout), layout), CommError);
}

// ---- A3C ----------------------------------------------------------------------------------------

// Two workers start from version 0 and push at once: whichever gradient the holder applies
// second was computed one update ago, so the lag reaches 1 at least.
TEST(A3c, TwoWorkersShowPolicyLag) {
  RlConfig c = load_rl_config("", {"algo.name=a3c", "env.copies=2", "algo.unroll=16",
                                   "run.env_steps=3000", "run.eval_episodes=1",
                                   "run.log_every=0", "run.eval_every=5"});
  std::mutex mutex;
  RunResult result;
  std::vector<nlohmann::json> evals;
  comm::local::run_ranks(3, {}, [&](comm::Communicator& comm) {
    RunHooks hooks;
    hooks.event = [&](const nlohmann::json& e) {
      std::lock_guard lock(mutex);
      if (e["event"] == "eval") evals.push_back(e);
    };
    RunResult r = run_algorithm(c, comm, hooks);
    if (comm.rank() == 0) result = r;
  });
  EXPECT_GE(result.report["policy_lag_max"].get<std::int64_t>(), 1);
  EXPECT_GT(result.report["policy_lag_mean"].get<double>(), 0);
  EXPECT_FALSE(evals.empty()) << "evaluations beside the holder reported nothing";
}

}  // namespace
}  // namespace distml::rl
