// The numerical kernels of distml's deep RL against naive references written from the papers'
// definitions: V-trace, GAE, n-step returns, the sum tree and prioritized replay.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <ostream>
#include <random>
#include <vector>

#include "distml/core/error.h"
#include "distml/rl/nstep.h"
#include "distml/rl/prioritized_replay.h"
#include "distml/rl/returns.h"
#include "distml/rl/sum_tree.h"

namespace distml::rl {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
// 0.999 quantiles of the chi-square distribution.
constexpr double kChiSquare999Dof19 = 43.820;
constexpr double kChiSquare999Dof18 = 42.312;

// A uniform double in [0, 1) from the engine's bits: std::uniform_real_distribution differs
// across standard libraries, the mt19937_64 stream does not.
double uniform(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

torch::Tensor uniform_tensor(int64_t t, int64_t b, double low, double high) {
  return torch::rand({t, b}, torch::kFloat64) * (high - low) + low;
}

// gamma where a step did not end the episode, 0 where it did (about 1 step in 5).
torch::Tensor random_discounts(int64_t t, int64_t b, double gamma) {
  return (torch::rand({t, b}, torch::kFloat64) > 0.2).to(torch::kFloat64) * gamma;
}

// Chi-square statistic of `counts` against probabilities proportional to `weights`.
double chi_square(const std::vector<double>& counts, const std::vector<double>& weights) {
  double draws = 0, total = 0, stat = 0;
  for (double c : counts) draws += c;
  for (double w : weights) total += w;
  for (std::size_t i = 0; i < counts.size(); ++i) {
    const double expected = draws * weights[i] / total;
    stat += (counts[i] - expected) * (counts[i] - expected) / expected;
  }
  return stat;
}

// ---------------------------------------------------------------------------------------------
// V-trace

struct VTraceCase {
  int64_t steps, batch;
  double clip_rho, clip_c, clip_pg_rho;
};

void PrintTo(const VTraceCase& c, std::ostream* os) {
  *os << "T=" << c.steps << " B=" << c.batch << " clips=" << c.clip_rho << "/" << c.clip_c << "/"
      << c.clip_pg_rho;
}

class VTraceTest : public ::testing::TestWithParam<VTraceCase> {};

TEST_P(VTraceTest, MatchesPaperDefinition) {
  const auto c = GetParam();
  torch::manual_seed(1234 + c.steps * 7 + c.batch);
  const auto log_rhos = uniform_tensor(c.steps, c.batch, -2.0, 2.0);
  const auto discounts = random_discounts(c.steps, c.batch, 0.9);
  const auto rewards = torch::randn({c.steps, c.batch}, torch::kFloat64);
  const auto values = torch::randn({c.steps, c.batch}, torch::kFloat64);
  const auto bootstrap = torch::randn({c.batch}, torch::kFloat64);

  const auto got =
      vtrace(log_rhos, discounts, rewards, values, bootstrap, c.clip_rho, c.clip_c, c.clip_pg_rho);
  ASSERT_EQ(got.vs.sizes(), values.sizes());
  ASSERT_EQ(got.pg_advantages.sizes(), values.sizes());

  auto lr = log_rhos.accessor<double, 2>();
  auto d = discounts.accessor<double, 2>();
  auto r = rewards.accessor<double, 2>();
  auto v = values.accessor<double, 2>();
  auto boot = bootstrap.accessor<double, 1>();
  auto vs = got.vs.accessor<double, 2>();
  auto pg = got.pg_advantages.accessor<double, 2>();
  for (int64_t b = 0; b < c.batch; ++b) {
    std::vector<double> want_vs(c.steps);
    for (int64_t s = 0; s < c.steps; ++s) {
      // v_s = V(x_s) + sum_{t>=s} (prod_{i=s}^{t-1} discount_i c_i) rho_t delta_t, full horizon.
      double target = v[s][b], coefficient = 1;
      for (int64_t t = s; t < c.steps; ++t) {
        const double rho = std::exp(lr[t][b]);
        const double next_value = t + 1 < c.steps ? v[t + 1][b] : boot[b];
        const double delta = std::min(c.clip_rho, rho) * (r[t][b] + d[t][b] * next_value - v[t][b]);
        target += coefficient * delta;
        coefficient *= d[t][b] * std::min(c.clip_c, rho);
      }
      want_vs[s] = target;
      EXPECT_NEAR(vs[s][b], target, 1e-6) << "s=" << s << " b=" << b;
    }
    for (int64_t s = 0; s < c.steps; ++s) {
      const double rho = std::exp(lr[s][b]);
      const double next_vs = s + 1 < c.steps ? want_vs[s + 1] : boot[b];
      const double want = std::min(c.clip_pg_rho, rho) * (r[s][b] + d[s][b] * next_vs - v[s][b]);
      EXPECT_NEAR(pg[s][b], want, 1e-6) << "s=" << s << " b=" << b;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    ShapesAndClips, VTraceTest,
    ::testing::Values(VTraceCase{1, 1, 1.0, 1.0, 1.0}, VTraceCase{5, 3, 1.0, 1.0, 1.0},
                      VTraceCase{20, 4, 1.0, 1.0, 1.0}, VTraceCase{20, 4, kInf, kInf, kInf},
                      VTraceCase{13, 2, 1e6, 1e6, 1e6}, VTraceCase{16, 3, 2.0, 0.5, 1.5},
                      VTraceCase{7, 5, 0.3, 0.9, 0.6}));

TEST(VTrace, OnPolicyIsDiscountedReturn) {
  torch::manual_seed(5);
  const int64_t steps = 9, batch = 3;
  const auto discounts = random_discounts(steps, batch, 0.95);
  const auto rewards = torch::randn({steps, batch}, torch::kFloat64);
  const auto values = torch::randn({steps, batch}, torch::kFloat64);
  const auto bootstrap = torch::randn({batch}, torch::kFloat64);
  const auto got =
      vtrace(torch::zeros({steps, batch}, torch::kFloat64), discounts, rewards, values, bootstrap);
  const auto want = gae(rewards, values, bootstrap, discounts, 1.0);
  EXPECT_TRUE(torch::allclose(got.vs, want.returns, 0, 1e-9));
}

TEST(VTrace, KeepsFloat32AndCutsGradients) {
  const auto values = torch::randn({4, 2}, torch::requires_grad());
  const auto got = vtrace(torch::zeros({4, 2}), torch::full({4, 2}, 0.9), torch::ones({4, 2}),
                          values, torch::zeros({2}));
  EXPECT_EQ(got.vs.scalar_type(), torch::kFloat32);
  EXPECT_FALSE(got.vs.requires_grad());
  EXPECT_FALSE(got.pg_advantages.requires_grad());
}

TEST(VTrace, NamesMismatchedArgument) {
  try {
    vtrace(torch::zeros({4, 2}), torch::zeros({4, 2}), torch::zeros({4, 3}), torch::zeros({4, 2}),
           torch::zeros({2}));
    FAIL() << "expected distml::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("rewards"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("[4, 3]"), std::string::npos) << e.what();
  }
  EXPECT_THROW(vtrace(torch::zeros({4, 2}), torch::zeros({4, 2}), torch::zeros({4, 2}),
                      torch::zeros({4, 2}), torch::zeros({3})),
               Error);
}

// ---------------------------------------------------------------------------------------------
// GAE

// Random episode ends and the matching discounts for one test case.
struct Episodes {
  torch::Tensor done, discounts;
};

Episodes random_episodes(int64_t steps, int64_t batch, double gamma) {
  const auto done = (torch::rand({steps, batch}, torch::kFloat64) < 0.2).to(torch::kFloat64);
  return {done, (1 - done) * gamma};
}

TEST(Gae, MatchesDoubleSumWithEpisodeCuts) {
  const double gamma = 0.97;
  for (double lambda : {0.0, 0.5, 0.95, 1.0}) {
    for (int64_t steps : {1, 6, 25}) {
      torch::manual_seed(steps * 31 + static_cast<int>(lambda * 100));
      const int64_t batch = 3;
      const auto episodes = random_episodes(steps, batch, gamma);
      const auto rewards = torch::randn({steps, batch}, torch::kFloat64);
      const auto values = torch::randn({steps, batch}, torch::kFloat64);
      const auto bootstrap = torch::randn({batch}, torch::kFloat64);
      const auto got = gae(rewards, values, bootstrap, episodes.discounts, lambda);

      auto done = episodes.done.accessor<double, 2>();
      auto r = rewards.accessor<double, 2>();
      auto v = values.accessor<double, 2>();
      auto boot = bootstrap.accessor<double, 1>();
      auto adv = got.advantages.accessor<double, 2>();
      auto ret = got.returns.accessor<double, 2>();
      for (int64_t b = 0; b < batch; ++b) {
        for (int64_t t = 0; t < steps; ++t) {
          // A_t = sum_l (gamma lambda)^l delta_{t+l}, up to and including the step that ends
          // the episode.
          double want = 0;
          for (int64_t l = 0; t + l < steps; ++l) {
            const int64_t u = t + l;
            const double next_value = u + 1 < steps ? v[u + 1][b] : boot[b];
            const double delta = r[u][b] + gamma * (1 - done[u][b]) * next_value - v[u][b];
            want += std::pow(gamma * lambda, static_cast<double>(l)) * delta;
            if (done[u][b] != 0) break;
          }
          EXPECT_NEAR(adv[t][b], want, 1e-9) << "lambda=" << lambda << " t=" << t << " b=" << b;
          EXPECT_NEAR(ret[t][b], want + v[t][b], 1e-9);
        }
      }
    }
  }
}

TEST(Gae, LambdaOneIsDiscountedReturnMinusValue) {
  torch::manual_seed(11);
  const int64_t steps = 30, batch = 4;
  const auto episodes = random_episodes(steps, batch, 0.99);
  const auto rewards = torch::randn({steps, batch}, torch::kFloat64);
  const auto values = torch::randn({steps, batch}, torch::kFloat64);
  const auto bootstrap = torch::randn({batch}, torch::kFloat64);
  auto returns = torch::empty_like(rewards);
  auto next = bootstrap.clone();
  for (int64_t t = steps - 1; t >= 0; --t) {
    next = rewards[t] + episodes.discounts[t] * next;
    returns[t].copy_(next);
  }
  const auto got = gae(rewards, values, bootstrap, episodes.discounts, 1.0);
  EXPECT_TRUE(torch::allclose(got.advantages, returns - values, 0, 1e-9));
  EXPECT_TRUE(torch::allclose(got.returns, returns, 0, 1e-9));
}

TEST(Gae, LambdaZeroIsOneStepTdError) {
  torch::manual_seed(12);
  const int64_t steps = 10, batch = 2;
  const auto episodes = random_episodes(steps, batch, 0.9);
  const auto rewards = torch::randn({steps, batch}, torch::kFloat64);
  const auto values = torch::randn({steps, batch}, torch::kFloat64);
  const auto bootstrap = torch::randn({batch}, torch::kFloat64);
  const auto next_values = torch::cat({values.slice(0, 1), bootstrap.unsqueeze(0)}, 0);
  const auto td = rewards + episodes.discounts * next_values - values;
  const auto got = gae(rewards, values, bootstrap, episodes.discounts, 0.0);
  EXPECT_TRUE(torch::allclose(got.advantages, td, 0, 1e-12));
}

TEST(Gae, NamesMismatchedArgument) {
  try {
    gae(torch::zeros({5, 2}), torch::zeros({5, 2}), torch::zeros({2}), torch::zeros({4, 2}), 0.9);
    FAIL() << "expected distml::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("discounts"), std::string::npos) << e.what();
  }
  EXPECT_THROW(gae(torch::zeros({5}), torch::zeros({5}), torch::zeros({1}), torch::zeros({5}), 0.9),
               Error);
}

// ---------------------------------------------------------------------------------------------
// NStepWindow

// Feeds step t of a scalar stream: observation {obs}, action {10 + obs}, next {next}.
void feed(NStepWindow& window, float obs, float reward, bool terminated, bool ended, float next,
          std::vector<Transition>& out) {
  const float observation[] = {obs}, action[] = {10 + obs}, next_observation[] = {next};
  window.add(observation, action, reward, terminated, ended, next_observation, out);
}

void expect_transition(const Transition& t, float obs, float reward, float discount, float next) {
  ASSERT_EQ(t.observation.size(), 1u);
  ASSERT_EQ(t.next_observation.size(), 1u);
  EXPECT_FLOAT_EQ(t.observation[0], obs);
  EXPECT_FLOAT_EQ(t.action[0], 10 + obs);
  EXPECT_FLOAT_EQ(t.reward, reward);
  EXPECT_FLOAT_EQ(t.discount, discount);
  EXPECT_FLOAT_EQ(t.next_observation[0], next);
}

TEST(NStepWindow, EmitsFullWindowsThenFlushesAtTerminationAndTruncation) {
  const double g = 0.9;
  NStepWindow window(3, g);
  std::vector<Transition> out;
  // Episode 1: steps 0..4 with rewards 1..5; step 4 terminates.
  feed(window, 0, 1, false, false, 1, out);
  feed(window, 1, 2, false, false, 2, out);
  EXPECT_TRUE(out.empty());
  feed(window, 2, 3, false, false, 3, out);
  ASSERT_EQ(out.size(), 1u);
  expect_transition(out[0], 0, 1 + g * 2 + g * g * 3, g * g * g, 3);
  feed(window, 3, 4, false, false, 4, out);
  ASSERT_EQ(out.size(), 2u);
  expect_transition(out[1], 1, 2 + g * 3 + g * g * 4, g * g * g, 4);
  feed(window, 4, 5, true, true, 5, out);
  ASSERT_EQ(out.size(), 5u);
  expect_transition(out[2], 2, 3 + g * 4 + g * g * 5, 0, 5);
  expect_transition(out[3], 3, 4 + g * 5, 0, 5);
  expect_transition(out[4], 4, 5, 0, 5);
  EXPECT_EQ(window.pending(), 0u);

  // Episode 2: two steps, truncated at the second with final observation 102.
  out.clear();
  feed(window, 100, 1, false, false, 101, out);
  EXPECT_TRUE(out.empty());
  feed(window, 101, 2, false, true, 102, out);
  ASSERT_EQ(out.size(), 2u);
  expect_transition(out[0], 100, 1 + g * 2, g * g, 102);
  expect_transition(out[1], 101, 2, g, 102);

  // Episode 3 starts clean: nothing of episode 2 leaks into its first window.
  out.clear();
  feed(window, 200, 1, false, false, 201, out);
  feed(window, 201, 1, false, false, 202, out);
  feed(window, 202, 1, false, false, 203, out);
  ASSERT_EQ(out.size(), 1u);
  expect_transition(out[0], 200, 1 + g + g * g, g * g * g, 203);
  EXPECT_EQ(window.pending(), 2u);
}

TEST(NStepWindow, OneStepIsPlainTransition) {
  NStepWindow window(1, 0.99);
  std::vector<Transition> out;
  feed(window, 0, 2, false, false, 1, out);
  feed(window, 1, 3, true, true, 2, out);
  ASSERT_EQ(out.size(), 2u);
  expect_transition(out[0], 0, 2, 0.99f, 1);
  expect_transition(out[1], 1, 3, 0, 2);
  EXPECT_THROW(NStepWindow(0, 0.9), Error);
}

// ---------------------------------------------------------------------------------------------
// SumTree

TEST(SumTree, TotalFollowsUpdates) {
  SumTree tree(5);
  EXPECT_EQ(tree.total(), 0);
  tree.set(0, 1.5);
  tree.set(4, 2.0);
  tree.set(2, 0.25);
  EXPECT_DOUBLE_EQ(tree.total(), 3.75);
  tree.set(4, 0.5);
  EXPECT_DOUBLE_EQ(tree.total(), 2.25);
  tree.set(0, 0);
  EXPECT_DOUBLE_EQ(tree.total(), 0.75);
  EXPECT_DOUBLE_EQ(tree.get(2), 0.25);
  EXPECT_DOUBLE_EQ(tree.get(1), 0);
}

TEST(SumTree, FindReturnsLeafWherePrefixSumFirstExceedsMass) {
  SumTree tree(4);
  for (std::size_t i = 0; i < 4; ++i) tree.set(i, std::vector<double>{1, 0, 2, 3}[i]);
  EXPECT_EQ(tree.find(0.0), 0u);
  EXPECT_EQ(tree.find(0.999), 0u);
  EXPECT_EQ(tree.find(1.0), 2u);  // the zero leaf 1 is skipped
  EXPECT_EQ(tree.find(2.999), 2u);
  EXPECT_EQ(tree.find(3.0), 3u);
  EXPECT_EQ(tree.find(5.999), 3u);
  EXPECT_EQ(tree.find(6.0), 3u);  // at total: clamped
}

TEST(SumTree, FindClampsToLastNonZeroLeaf) {
  SumTree tree(5);  // not a power of two: three padding leaves
  tree.set(0, 1);
  tree.set(1, 2);
  EXPECT_EQ(tree.find(2.999), 1u);
  EXPECT_EQ(tree.find(3.0), 1u);
  EXPECT_EQ(tree.find(3.0 + 1e-9), 1u);
  EXPECT_EQ(tree.find(100.0), 1u);
  SumTree single(1);
  single.set(0, 0.5);
  EXPECT_EQ(single.find(0.7), 0u);
}

TEST(SumTree, RejectsBadPrioritiesIndicesAndMass) {
  SumTree tree(3);
  EXPECT_THROW(tree.set(0, -1), Error);
  EXPECT_THROW(tree.set(0, std::nan("")), Error);
  EXPECT_THROW(tree.set(0, kInf), Error);
  EXPECT_THROW(tree.set(3, 1), Error);
  EXPECT_THROW(tree.get(3), Error);
  EXPECT_THROW(tree.find(0), Error);  // all zero
  tree.set(1, 1);
  EXPECT_THROW(tree.find(-0.5), Error);
  EXPECT_THROW(tree.find(std::nan("")), Error);
  EXPECT_THROW(SumTree(0), Error);
}

TEST(SumTree, DrawsInProportionToPriorities) {
  std::mt19937_64 rng(2024);
  const std::size_t leaves = 20;
  SumTree tree(leaves);
  std::vector<double> priorities(leaves);
  for (std::size_t i = 0; i < leaves; ++i) {
    priorities[i] = 0.05 + uniform(rng);
    tree.set(i, priorities[i]);
  }
  auto draw = [&] {
    std::vector<double> counts(leaves, 0);
    for (int k = 0; k < 200000; ++k) counts[tree.find(uniform(rng) * tree.total())] += 1;
    return counts;
  };
  EXPECT_LT(chi_square(draw(), priorities), kChiSquare999Dof19);

  // Change a quarter of the priorities and zero one: the draws follow the new weights.
  for (std::size_t i : {1u, 6u, 9u, 17u}) {
    priorities[i] = 3 * uniform(rng);
    tree.set(i, priorities[i]);
  }
  tree.set(12, 0);
  auto counts = draw();
  EXPECT_EQ(counts[12], 0);
  counts.erase(counts.begin() + 12);
  priorities.erase(priorities.begin() + 12);
  EXPECT_LT(chi_square(counts, priorities), kChiSquare999Dof18);
}

TEST(MinTree, TracksMinimum) {
  MinTree tree(6);
  EXPECT_EQ(tree.min(), kInf);
  tree.set(3, 2.0);
  tree.set(5, 0.5);
  EXPECT_EQ(tree.min(), 0.5);
  tree.set(5, 4.0);
  EXPECT_EQ(tree.min(), 2.0);
}

// ---------------------------------------------------------------------------------------------
// PrioritizedReplay

Transition scalar_transition(float value) {
  return {{value, -value}, {value + 0.5f}, value, 0.9f, {value + 1, -value - 1}};
}

TEST(PrioritizedReplay, RingOverwritesOldest) {
  PrioritizedReplay replay(4, 2, 1, 0.6, 1);
  for (int k = 0; k < 6; ++k) replay.add(scalar_transition(static_cast<float>(k)), 1.0);
  EXPECT_EQ(replay.size(), 4u);
  const auto batch = replay.sample(256, 0.4);
  ASSERT_EQ(batch.indices.size(), 256u);
  ASSERT_EQ(batch.observations.size(), 512u);
  ASSERT_EQ(batch.actions.size(), 256u);
  ASSERT_EQ(batch.next_observations.size(), 512u);
  std::vector<int> seen(6, 0);
  for (std::size_t k = 0; k < batch.indices.size(); ++k) {
    const auto index = batch.indices[k];
    ASSERT_GE(index, 2u);  // transitions 0 and 1 were overwritten by 4 and 5
    ASSERT_LT(index, 6u);
    ++seen[index];
    const float value = static_cast<float>(index);  // transition k was added k-th
    EXPECT_EQ(batch.rewards[k], value);
    EXPECT_EQ(batch.discounts[k], 0.9f);
    EXPECT_EQ(batch.observations[2 * k], value);
    EXPECT_EQ(batch.observations[2 * k + 1], -value);
    EXPECT_EQ(batch.actions[k], value + 0.5f);
    EXPECT_EQ(batch.next_observations[2 * k], value + 1);
    EXPECT_EQ(batch.weights[k], 1.0f);  // equal priorities
  }
  for (int k = 2; k < 6; ++k) EXPECT_GT(seen[k], 0) << k;
}

TEST(PrioritizedReplay, WeightsFollowFormula) {
  const double alpha = 0.7, beta = 0.5;
  PrioritizedReplay replay(16, 2, 1, alpha, 7);
  std::vector<double> priorities;
  for (int k = 0; k < 10; ++k) {
    priorities.push_back(0.5 + k * 0.75);
    replay.add(scalar_transition(static_cast<float>(k)), priorities.back());
  }
  const double n = static_cast<double>(priorities.size());
  double total = 0;
  for (double p : priorities) total += std::pow(p, alpha);
  double max_weight = 0;
  for (double p : priorities)
    max_weight = std::max(max_weight, std::pow(n * std::pow(p, alpha) / total, -beta));
  const auto batch = replay.sample(64, beta);
  for (std::size_t k = 0; k < batch.indices.size(); ++k) {
    const double probability = std::pow(priorities[batch.indices[k]], alpha) / total;
    const double want = std::pow(n * probability, -beta) / max_weight;
    EXPECT_NEAR(batch.weights[k], want, 1e-6);
    EXPECT_GT(batch.weights[k], 0.0f);
    EXPECT_LE(batch.weights[k], 1.0f);
  }
}

TEST(PrioritizedReplay, ZeroPriorityCanStillBeDrawn) {
  PrioritizedReplay replay(4, 2, 1, 0.6, 3);
  replay.add(scalar_transition(1), 0.0);
  replay.add(scalar_transition(2), 0.0);
  const auto batch = replay.sample(8, 1.0);
  for (float w : batch.weights) EXPECT_EQ(w, 1.0f);
}

TEST(PrioritizedReplay, StaleIndexUpdateIsIgnored) {
  const double beta = 0.5;
  PrioritizedReplay replay(2, 2, 1, 1.0, 9);
  replay.add(scalar_transition(0), 1.0);  // index 0, slot 0
  replay.add(scalar_transition(1), 1.0);  // index 1, slot 1
  replay.add(scalar_transition(2), 1.0);  // index 2 overwrites slot 0
  const std::uint64_t stale[] = {0};
  const float high[] = {1000.0f};
  replay.update_priorities(stale, high);
  for (float w : replay.sample(32, beta).weights) EXPECT_EQ(w, 1.0f);

  const std::uint64_t fresh[] = {2};
  replay.update_priorities(fresh, high);
  const auto batch = replay.sample(32, beta);
  int drawn_fresh = 0;
  for (std::size_t k = 0; k < batch.indices.size(); ++k) {
    if (batch.indices[k] == 2) {
      ++drawn_fresh;
      EXPECT_NEAR(batch.weights[k], std::pow(1.0 / 1000.0, beta), 1e-7);
    } else {
      EXPECT_EQ(batch.indices[k], 1u);
      EXPECT_EQ(batch.weights[k], 1.0f);
    }
  }
  EXPECT_GE(drawn_fresh, 31);  // index 1 holds 1/1001 of the mass

  const std::uint64_t never[] = {3};
  EXPECT_THROW(replay.update_priorities(never, high), Error);
  const float two[] = {1.0f, 2.0f};
  EXPECT_THROW(replay.update_priorities(fresh, two), Error);
}

TEST(PrioritizedReplay, SampleFrequenciesFollowPriorityPowAlpha) {
  const double alpha = 0.6;
  const std::size_t entries = 20;
  std::mt19937_64 rng(77);
  PrioritizedReplay replay(entries, 2, 1, alpha, 5);
  std::vector<double> weights;
  for (std::size_t k = 0; k < entries; ++k) {
    const double p = 0.1 + 2 * uniform(rng);
    weights.push_back(std::pow(p, alpha));
    replay.add(scalar_transition(static_cast<float>(k)), p);
  }
  std::vector<double> counts(entries, 0);
  for (int round = 0; round < 6250; ++round) {  // 200k draws
    for (auto index : replay.sample(32, 0.4).indices) counts[index] += 1;
  }
  EXPECT_LT(chi_square(counts, weights), kChiSquare999Dof19);

  // After new priorities the draws follow them.
  std::vector<std::uint64_t> indices;
  std::vector<float> priorities;
  for (std::uint64_t k = 0; k < entries; k += 3) {
    const float p = static_cast<float>(0.1 + 3 * uniform(rng));
    indices.push_back(k);
    priorities.push_back(p);
    weights[k] = std::pow(static_cast<double>(p), alpha);
  }
  replay.update_priorities(indices, priorities);
  std::fill(counts.begin(), counts.end(), 0);
  for (int round = 0; round < 6250; ++round) {
    for (auto index : replay.sample(32, 0.4).indices) counts[index] += 1;
  }
  EXPECT_LT(chi_square(counts, weights), kChiSquare999Dof19);
}

TEST(PrioritizedReplay, DeterministicUnderSeed) {
  auto run = [](std::uint64_t seed) {
    PrioritizedReplay replay(64, 2, 1, 0.6, seed);
    std::vector<std::uint64_t> drawn;
    for (int k = 0; k < 100; ++k) {
      replay.add(scalar_transition(static_cast<float>(k)), 1.0 + k % 7);
      if (k % 10 == 9) {
        const auto batch = replay.sample(16, 0.4);
        drawn.insert(drawn.end(), batch.indices.begin(), batch.indices.end());
        std::vector<float> priorities(batch.indices.size(), 0.5f + static_cast<float>(k % 3));
        replay.update_priorities(batch.indices, priorities);
      }
    }
    return drawn;
  };
  EXPECT_EQ(run(42), run(42));
  EXPECT_NE(run(42), run(43));
}

TEST(PrioritizedReplay, RejectsEmptySampleAndWrongSizes) {
  PrioritizedReplay replay(8, 2, 1, 0.6, 1);
  EXPECT_THROW(replay.sample(4, 0.4), Error);
  Transition wrong = scalar_transition(1);
  wrong.observation.push_back(0);
  EXPECT_THROW(replay.add(wrong, 1.0), Error);
  EXPECT_THROW(replay.add(scalar_transition(1), -1.0), Error);
  EXPECT_THROW(PrioritizedReplay(0, 2, 1, 0.6, 1), Error);
}

}  // namespace
}  // namespace distml::rl
