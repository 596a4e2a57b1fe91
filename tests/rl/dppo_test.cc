// DPPO against one process: N ranks that each hold a slice of a minibatch compute the gradient,
// the diagnostics and the explained variance that one process holding all the rows computes
// (float64). And PPO's update lines: CleanRL's diagnostics, algo.target_kl's early stop.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <mutex>
#include <vector>

#include "distml/comm/local/local_world.h"
#include "distml/rl/algos/algorithm.h"
#include "distml/rl/algos/ppo_loss.h"
#include "distml/rl/policy.h"

namespace distml::rl {
namespace {

constexpr double kRoundoff = 0x1p-53;  // float64 unit roundoff

// A Gaussian policy (3 observations, 2 actions) in float64; every call builds the same one.
ActorCritic policy_net() {
  torch::manual_seed(5);
  ActorCritic net(Space::box({0, 0, 0}, {1, 1, 1}), Space::box({-2, -1}, {2, 1}), NetworkOptions{});
  net->to(torch::kDouble);
  return net;
}

// n rows for policy_net(): old log-probabilities off by up to +-0.5 (ratios inside and outside
// the clip), old values off by up to +-1 (inside and outside the value clip), advantages whose
// mean moves from slice to slice of `slice` rows (so that each rank's own mean and std are far
// from the global ones).
PpoBatch random_batch(std::int64_t n, std::int64_t slice) {
  ActorCritic net = policy_net();
  torch::manual_seed(17);
  PpoBatch b;
  b.observations = torch::randn({n, 3}, torch::kDouble);
  torch::NoGradGuard no_grad;
  const auto out = net->forward(b.observations);
  b.actions = out.policy + 0.5 * torch::randn({n, 2}, torch::kDouble);
  b.log_probs =
      net->log_prob(out.policy, b.actions) + torch::linspace(-0.5, 0.5, n, torch::kDouble);
  b.values = out.value + torch::linspace(1, -1, n, torch::kDouble);
  b.advantages = torch::randn({n}, torch::kDouble) * 2 +
                 4 * torch::floor(torch::arange(n, torch::kDouble) / static_cast<double>(slice));
  b.returns = torch::randn({n}, torch::kDouble);
  return b;
}

PpoBatch rows_of(const PpoBatch& b, std::int64_t first, std::int64_t count) {
  auto s = [&](const torch::Tensor& t) { return t.slice(0, first, first + count).clone(); };
  return {s(b.observations), s(b.actions),    s(b.log_probs),
          s(b.values),       s(b.advantages), s(b.returns)};
}

std::vector<torch::Tensor> gradients(ActorCriticImpl& net) {
  std::vector<torch::Tensor> g;
  for (const auto& p : net.parameters()) g.push_back(p.grad().clone());
  return g;
}

AlgoConfig ppo_algo() {
  AlgoConfig algo;
  algo.clip = 0.2;
  algo.value_clip = 0.5;
  algo.entropy = 0.01;
  algo.value_coef = 0.5;
  algo.normalize_advantages = true;
  return algo;
}

// Per parameter element, (1/n) sum over rows of the magnitude of each part of the row's loss
// gradient, with the row's normalised advantage replaced by |A^_i| + 1: what the rounding of
// the two computations is measured against (the tolerance's derivation is in the test).
std::vector<torch::Tensor> row_gradient_scale(const PpoBatch& b, const AlgoConfig& algo) {
  const std::int64_t n = b.advantages.size(0);
  const auto a = b.advantages;
  const auto normalised = ((a - a.mean()) / (a.std() + 1e-8)).abs() + 1;  // CleanRL's formula
  std::vector<torch::Tensor> scale;
  ActorCritic net = policy_net();
  for (const auto& p : net->parameters()) scale.push_back(torch::zeros_like(p));
  for (std::int64_t i = 0; i < n; ++i) {
    PpoBatch one = rows_of(b, i, 1);
    AlgoConfig part = algo;
    part.normalize_advantages = false;
    for (int which = 0; which < 3; ++which) {  // the policy, the value and the entropy terms
      one.advantages = which == 0 ? normalised.slice(0, i, i + 1) : torch::zeros({1}, a.options());
      part.value_coef = which == 1 ? algo.value_coef : 0;
      part.entropy = which == 2 ? algo.entropy : 0;
      net->zero_grad();
      ppo_loss(*net, one, torch::arange(1), part).total.backward();
      const auto params = net->parameters();
      for (std::size_t j = 0; j < params.size(); ++j)
        if (params[j].grad().defined()) scale[j] += params[j].grad().abs() / n;
    }
  }
  return scale;
}

// Rows [r m, (r + 1) m) on rank r of N against all N m rows in one process. Both sides run the
// same float64 operations on each row; they differ in (1) the advantages' mean and std (Chan's
// merge of N parts against two passes over all; |A| < 12, std > 2: the normalised advantages
// differ by at most ~20 u x 12 / 2 = 120 u), (2) the grouping of the mean over rows (N means of
// m rows then their mean, against one mean of N m rows: gamma_{N m + N} ~ 20 u relative to the
// sum of the rows' magnitudes) and (3) the BLAS's blocking of m against N m rows (each row's
// forward and backward through two 64-wide layers: within ~6 gamma_65 ~ 400 u of its own
// magnitude). The gradient is the mean of the rows' gradients, so every element differs by at
// most ~550 u times row_gradient_scale; 1e-12 is ~9000 u. Normalising each rank's rows on their
// own, or summing where the mean belongs, changes elements by their whole size.
void expect_ranks_equal_one_process(int ranks) {
  const std::int64_t m = 5, n = ranks * m;
  const PpoBatch all = random_batch(n, m);
  const AlgoConfig algo = ppo_algo();
  // The reference: one process's PPO loss on all n rows, their advantages normalised as
  // CleanRL writes it (torch's mean and unbiased std), not by the code under test.
  PpoBatch normalised = all;
  normalised.advantages = (all.advantages - all.advantages.mean()) / (all.advantages.std() + 1e-8);
  AlgoConfig given_advantages = algo;
  given_advantages.normalize_advantages = false;
  ActorCritic reference = policy_net();
  const PpoLoss one = ppo_loss(*reference, normalised, torch::arange(n), given_advantages);
  reference->zero_grad();
  one.total.backward();
  const std::vector<torch::Tensor> expected = gradients(*reference);
  const std::vector<torch::Tensor> scale = row_gradient_scale(all, algo);

  std::vector<ActorCritic> nets;
  for (int r = 0; r < ranks; ++r) nets.push_back(policy_net());
  std::vector<PpoLoss> losses(static_cast<std::size_t>(ranks));
  comm::local::run_ranks(ranks, {}, [&](comm::Communicator& comm) {
    const int r = comm.rank();
    losses[r] =
        ppo_minibatch_gradient(*nets[r], rows_of(all, r * m, m), torch::arange(m), algo, comm);
  });
  for (int r = 0; r < ranks; ++r) {
    const std::vector<torch::Tensor> got = gradients(*nets[r]);
    ASSERT_EQ(got.size(), expected.size());
    for (std::size_t j = 0; j < got.size(); ++j) {
      const auto excess = (got[j] - expected[j]).abs() - 1e-12 * scale[j];
      EXPECT_LE(excess.max().item<double>(), 0)
          << "rank " << r << " of " << ranks << ", parameter " << j << ": largest difference "
          << (got[j] - expected[j]).abs().max().item<double>() << " against a gradient of "
          << expected[j].abs().max().item<double>();
    }
    // The loss's numbers: means of n terms below ~10 (normalised advantages < 4, ratios < 1.7,
    // squared value errors < 10), each rounding as above: ~550 u x 10; 1e-12 is ~9000 u.
    const PpoLoss& l = losses[r];
    EXPECT_NEAR(l.policy, one.policy, 1e-12);
    EXPECT_NEAR(l.value, one.value, 1e-12);
    EXPECT_NEAR(l.entropy, one.entropy, 1e-12);
    EXPECT_NEAR(l.approx_kl, one.approx_kl, 1e-12);
    EXPECT_NEAR(l.old_approx_kl, one.old_approx_kl, 1e-12);
    // Counts over 5 and over n rows, in float64: k/5 averaged against sum k / n, 3 roundings.
    EXPECT_NEAR(l.clip_fraction, one.clip_fraction, 4 * kRoundoff);
  }
  EXPECT_GT(one.clip_fraction, 0.1) << "the case must clip some samples";
}

TEST(Dppo, TwoRanksComputeTheGradientOfOneProcessOnTheGlobalMinibatch) {
  expect_ranks_equal_one_process(2);
}

TEST(Dppo, ThreeRanksComputeTheGradientOfOneProcessOnTheGlobalMinibatch) {
  expect_ranks_equal_one_process(3);
}

// The scale is the one process's: mean and torch's unbiased std of all the rows.
TEST(Dppo, GlobalAdvantageScaleIsTheMeanAndUnbiasedStdOfEveryRanksRows) {
  const auto all = torch::randn({12}, torch::kDouble) * 3 + 2;
  double mean = 0, m2 = 0;
  for (std::int64_t i = 0; i < 12; ++i) mean += all[i].item<double>() / 12;
  for (std::int64_t i = 0; i < 12; ++i) m2 += std::pow(all[i].item<double>() - mean, 2);
  const double std_dev = std::sqrt(m2 / 11);
  std::mutex mutex;
  comm::local::run_ranks(3, {}, [&](comm::Communicator& comm) {
    const AdvantageScale s =
        global_advantage_scale(all.slice(0, 4 * comm.rank(), 4 * comm.rank() + 4), comm);
    std::lock_guard lock(mutex);
    EXPECT_EQ(s.count, 12);
    // Twelve values below ~12: the merge and the two passes differ by a few ulps of 12 each.
    EXPECT_NEAR(s.mean, mean, 64 * kRoundoff * 12);
    EXPECT_NEAR(s.std, std_dev, 64 * kRoundoff * 12);
  });
}

// CleanRL's 1 - Var(y - y_hat) / Var(y) (population variances) over every rank's batch.
TEST(Dppo, ExplainedVarianceIsOverEveryRanksBatch) {
  const PpoBatch all = random_batch(12, 4);
  double mean_y = 0, mean_e = 0;
  for (std::int64_t i = 0; i < 12; ++i) {
    mean_y += all.returns[i].item<double>() / 12;
    mean_e += (all.returns[i] - all.values[i]).item<double>() / 12;
  }
  double var_y = 0, var_e = 0;
  for (std::int64_t i = 0; i < 12; ++i) {
    var_y += std::pow(all.returns[i].item<double>() - mean_y, 2) / 12;
    var_e += std::pow((all.returns[i] - all.values[i]).item<double>() - mean_e, 2) / 12;
  }
  const double expected = 1 - var_e / var_y;
  std::mutex mutex;
  comm::local::run_ranks(3, {}, [&](comm::Communicator& comm) {
    const double got = explained_variance(rows_of(all, 4 * comm.rank(), 4), comm);
    std::lock_guard lock(mutex);
    // Twelve squared terms below ~10 in each variance; their ratio: ~100 ulps of the result's
    // terms (|1 - ratio| < 10).
    EXPECT_NEAR(got, expected, 128 * kRoundoff * 10);
  });
  EXPECT_TRUE(std::isnan([&] {
    PpoBatch flat = all;
    flat.returns = torch::ones({12}, torch::kDouble);
    double v = 0;
    comm::local::run_ranks(1, {},
                           [&](comm::Communicator& comm) { v = explained_variance(flat, comm); });
    return v;
  }()))
      << "returns that do not vary explain nothing (CleanRL: NaN)";
}

// ---- PPO's update lines
// ---------------------------------------------------------------------------

struct PpoRun {
  std::vector<nlohmann::json> updates;
  RunResult result;
  std::vector<std::uint64_t> digests;
};

PpoRun run_ppo(const std::vector<std::string>& overrides, int ranks) {
  const RlConfig c = load_rl_config("", overrides);
  PpoRun out;
  std::mutex mutex;
  comm::local::run_ranks(ranks, {}, [&](comm::Communicator& comm) {
    RunHooks hooks;
    hooks.event = [&](const nlohmann::json& e) {
      std::lock_guard lock(mutex);
      if (e["event"] == "update") out.updates.push_back(e);
    };
    RunResult r = run_algorithm(c, comm, hooks);
    std::lock_guard lock(mutex);
    out.digests.push_back(r.parameter_digest);
    if (comm.rank() == 0) out.result = r;
  });
  return out;
}

const std::vector<std::string> kSmallPpo = {
    "algo.name=ppo",     "env.name=cartpole", "env.copies=2",
    "algo.unroll=32",    "algo.epochs=4",     "algo.minibatches=2",
    "run.env_steps=640", "run.log_every=1",   "run.eval_episodes=1"};

std::vector<std::string> with(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// After the first epoch the last minibatch's approx_kl is positive (its parameters took a step),
// so a target of 1e-9 stops every update after one epoch; one of 1e9 never stops one. The ranks
// decide together (their approx_kl is the global minibatch's), or their all-reduces would part.
TEST(PpoTargetKl, StopsTheEpochsOnceApproxKlExceedsIt) {
  const PpoRun tight = run_ppo(with(kSmallPpo, {"algo.target_kl=1e-9"}), 2);
  ASSERT_EQ(tight.updates.size(), 5u);  // 640 steps / (2 ranks x 2 copies x 32 steps)
  for (const auto& e : tight.updates) {
    EXPECT_EQ(e["epochs"], 1) << e.dump();
    EXPECT_GT(e["approx_kl"].get<double>(), 1e-9) << e.dump();
  }
  EXPECT_EQ(tight.digests[0], tight.digests[1]);
  const PpoRun loose = run_ppo(with(kSmallPpo, {"algo.target_kl=1e9"}), 2);
  for (const auto& e : loose.updates) EXPECT_EQ(e["epochs"], 4) << e.dump();
  EXPECT_NE(loose.digests[0], tight.digests[0]) << "three more epochs changed nothing?";
  const PpoRun off = run_ppo(kSmallPpo, 2);
  for (const auto& e : off.updates) EXPECT_FALSE(e.contains("epochs")) << "target_kl is off";
}

TEST(PpoTargetKl, IsRefusedForAlgorithmsWithoutEpochs) {
  for (const std::string algo : {"a2c", "a3c", "impala", "apex"})
    EXPECT_THROW(load_rl_config("", {"algo.name=" + algo, "algo.target_kl=0.02"}), ConfigError)
        << algo;
}

// Every update line and the done line carry CleanRL's diagnostics; a Gaussian policy's
// policy_std is the mean of exp(log_std). With a learning rate of 1e-9, Adam moves log_std by at
// most lr (1 - beta1) / sqrt(1 - beta2) ~ 3.2 lr a step (Kingma and Ba, sec. 2.1), over 10 updates
// x 4 epochs x 2 minibatches = 80 steps: 2.6e-7, so policy_std stays within that (and float32's
// 2^-23 relative) of exp(-0.5).
TEST(PpoDiagnostics, UpdateAndDoneLinesCarryThemAndPolicyStdIsTheMeanSigma) {
  const PpoRun r =
      run_ppo({"algo.name=ppo", "env.name=pendulum", "env.copies=2", "algo.unroll=32",
               "algo.epochs=4", "algo.minibatches=2", "run.env_steps=1280", "run.log_every=1",
               "run.eval_episodes=1", "network.init_log_std=-0.5", "optim.lr=1e-9"},
              2);
  ASSERT_EQ(r.updates.size(), 10u);
  for (const auto& e : r.updates)
    for (const char* key :
         {"approx_kl", "old_approx_kl", "clip_fraction", "explained_variance", "policy_std", "lr"})
      EXPECT_TRUE(e.contains(key)) << key << " missing from " << e.dump();
  for (const char* key :
       {"approx_kl", "old_approx_kl", "clip_fraction", "explained_variance", "policy_std"})
    EXPECT_TRUE(r.result.report.contains(key)) << key << " missing from the done line";
  const double sigma = std::exp(-0.5);
  EXPECT_NEAR(r.result.report["policy_std"].get<double>(), sigma, sigma * (2.6e-7 + 0x1p-23));
  const PpoRun discrete = run_ppo(kSmallPpo, 1);
  EXPECT_FALSE(discrete.updates.front().contains("policy_std")) << "no sigma for a softmax";
}

}  // namespace
}  // namespace distml::rl
