// The model-averaging strategies (local SGD, post-local SGD, EASGD, gossip) against references
// written out directly: N independent single-rank SGD loops on the ranks' shards, combined by
// plain tensor arithmetic as the papers write them; and through the trainer, against
// synchronous SGD where they must coincide with it.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <iostream>
#include <mutex>

#include "distml/comm/local/local_world.h"
#include "distml/core/error.h"
#include "distml/train/strategies/easgd_strategy.h"
#include "distml/train/strategies/gossip_strategy.h"
#include "distml/train/strategies/local_sgd_strategy.h"
#include "distml/train/strategies/post_local_sgd_strategy.h"
#include "distml/train/strategies/replicas.h"
#include "distml/train/strategy_factory.h"
#include "distml/train/tensor_buffer.h"
#include "trainer_fixture.h"

namespace distml::train {
namespace {

constexpr int kRows = 6;  // samples per rank per step

// Everything in float64. The strategies and the reference compute each replica's gradient from
// the same rows with the same operations; they differ only in how sums over the N <= 4 ranks
// are grouped (the all-reduce's order against the reference's), each such sum moving by at most
// N u of its terms' magnitude (u = 2^-53, Higham 4.2), and in where an average is divided. Ten
// steps of SGD with momentum carry each step's difference forward; a factor 1000 allows for the
// momentum's memory and the trajectory's sensitivity to where it has been (as the trainer
// tests' bound, trainer_fixture.h): 10 x 4 u x 1000 = 4.4e-12, rounded up to 1e-11 of the
// parameters' norm. A wrong formula (an average missed, alpha or a weight wrong) is off by a
// share of a step, 1e-3 of the norm and more. The consensus distance is a difference of nearly
// equal replicas, about 1e-2 of their norm apart: 1e-11 / 1e-2 of it, rounded up to 1e-8.
constexpr double kBound = 1e-11, kDistanceBound = 1e-8;

struct TwoLayerNetImpl : torch::nn::Module {
  TwoLayerNetImpl() {
    fc1 = register_module("fc1", torch::nn::Linear(12, 16));
    fc2 = register_module("fc2", torch::nn::Linear(16, 3));
  }
  torch::Tensor forward(torch::Tensor x) { return fc2(torch::relu(fc1(x))); }
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
};
TORCH_MODULE(TwoLayerNet);

struct Rows {
  torch::Tensor x, y;
};

Rows make_data(int rows) {
  auto gen = torch::make_generator<at::CPUGeneratorImpl>(7);
  return {torch::randn({rows, 12}, gen, torch::kFloat64), torch::randint(0, 3, {rows}, gen)};
}

TwoLayerNet initial_net(std::uint64_t seed) {
  torch::manual_seed(seed);
  TwoLayerNet net;
  net->to(torch::kFloat64);
  return net;
}

TwoLayerNet copy_of(const TwoLayerNet& from) {
  TwoLayerNet net;
  net->to(torch::kFloat64);
  torch::NoGradGuard no_grad;
  auto src = from->parameters(), dst = net->parameters();
  for (std::size_t i = 0; i < src.size(); ++i) dst[i].copy_(src[i]);
  return net;
}

torch::optim::SGDOptions sgd_options() { return torch::optim::SGDOptions(0.1).momentum(0.9); }

// The test's own flattening, independent of replicas.h.
torch::Tensor flatten(const TwoLayerNet& net) {
  std::vector<torch::Tensor> parts;
  for (auto& p : net->parameters()) parts.push_back(p.detach().reshape(-1));
  return torch::cat(parts);
}

void assign(const TwoLayerNet& net, const torch::Tensor& flat) {
  torch::NoGradGuard no_grad;
  std::int64_t offset = 0;
  for (auto& p : net->parameters()) {
    p.copy_(flat.narrow(0, offset, p.numel()).view(p.sizes()));
    offset += p.numel();
  }
}

// Loss of rank `rank`'s shard of step `k` (0-based) of a `world`-rank run.
torch::Tensor shard_loss(TwoLayerNet net, const Rows& d, int world, int rank, int k) {
  const int begin = (k * world + rank) * kRows;
  return torch::nn::functional::cross_entropy(net->forward(d.x.narrow(0, begin, kRows)),
                                              d.y.narrow(0, begin, kRows));
}

double relative_difference(const torch::Tensor& a, const torch::Tensor& b) {
  return ((a - b).norm() / b.norm()).item<double>();
}

// The worst difference a test saw, printed so that the measured margin is on record.
struct Worst {
  double value = 0;
  void add(double d) { value = std::max(value, d); }
  ~Worst() { std::cout << "[ measured ] worst relative difference " << value << "\n"; }
};

// What one rank saw running a strategy.
struct RankRun {
  std::vector<torch::Tensor> history;  // flat parameters after each step
  torch::Tensor reconciled;            // flat parameters after reconcile()
  StrategyStats stats;                 // after reconcile()
  torch::Tensor centre;                // EASGD's x~ before reconcile()
};

// The rank's side: `steps` SGD steps on its shards with `strategy`'s hooks, then reconcile().
RankRun run_strategy(Strategy& strategy, const TwoLayerNet& init, const Rows& d,
                     comm::Communicator& comm, int steps) {
  TwoLayerNet net = copy_of(init);
  torch::optim::SGD opt(net->parameters(), sgd_options());
  strategy.setup(nn::tensors_of(*net));
  RankRun out;
  for (int k = 0; k < steps; ++k) {
    opt.zero_grad();
    strategy.before_backward(true);
    shard_loss(net, d, comm.size(), comm.rank(), k).backward();
    strategy.before_optimizer_step();
    strategy.optimizer_step(opt);
    strategy.after_optimizer_step(opt, k + 1);
    out.history.push_back(flatten(net));
  }
  if (auto* easgd = dynamic_cast<EasgdStrategy*>(&strategy)) out.centre = easgd->centre().clone();
  strategy.reconcile(opt);
  out.reconciled = flatten(net);
  out.stats = strategy.stats();
  return out;
}

// Runs `fn(comm)` on `world` local ranks; returns each rank's RankRun.
template <class Fn>
std::vector<RankRun> collect(int world, Fn fn) {
  std::mutex mutex;
  std::vector<RankRun> out(world);
  comm::local::run_ranks(world, {}, [&](comm::Communicator& comm) {
    auto run = fn(comm);
    std::lock_guard lock(mutex);
    out[comm.rank()] = std::move(run);
  });
  return out;
}

// The reference: `world` replicas, each a single-rank SGD loop on its rank's shards.
class Replicas {
 public:
  Replicas(const TwoLayerNet& init, int world) {
    for (int i = 0; i < world; ++i) {
      nets_.push_back(copy_of(init));
      opts_.push_back(
          std::make_unique<torch::optim::SGD>(nets_.back()->parameters(), sgd_options()));
    }
  }
  int size() const { return static_cast<int>(nets_.size()); }
  // Gradients of step k on every replica.
  void backward(const Rows& d, int k) {
    for (int i = 0; i < size(); ++i) {
      opts_[i]->zero_grad();
      shard_loss(nets_[i], d, size(), i, k).backward();
    }
  }
  void step() {
    for (auto& o : opts_) o->step();
  }
  // Synchronous SGD: every replica gets the mean gradient.
  void average_gradients() {
    torch::NoGradGuard no_grad;
    for (std::size_t p = 0; p < nets_[0]->parameters().size(); ++p) {
      auto sum = torch::zeros_like(nets_[0]->parameters()[p]);
      for (auto& n : nets_) sum += n->parameters()[p].grad();
      for (auto& n : nets_) n->parameters()[p].mutable_grad().copy_(sum / size());
    }
  }
  void average_momentum() {
    torch::NoGradGuard no_grad;
    const auto count = momentum(0).size();
    for (std::size_t p = 0; p < count; ++p) {
      auto sum = torch::zeros_like(momentum(0)[p]);
      for (int i = 0; i < size(); ++i) sum += momentum(i)[p];
      for (int i = 0; i < size(); ++i) momentum(i)[p].copy_(sum / size());
    }
  }
  torch::Tensor get(int i) const { return flatten(nets_[i]); }
  void set(int i, const torch::Tensor& flat) { assign(nets_[i], flat); }
  torch::Tensor mean() const {
    auto sum = torch::zeros_like(get(0));
    for (int i = 0; i < size(); ++i) sum += get(i);
    return sum / size();
  }
  // sqrt(mean over replicas of ||x_i - target||^2).
  double distance_to(const torch::Tensor& target) const {
    double sum = 0;
    for (int i = 0; i < size(); ++i)
      sum += (get(i) - target).to(torch::kFloat64).square().sum().item<double>();
    return std::sqrt(sum / size());
  }

 private:
  // The momentum buffers of replica i, aliasing the optimizer's.
  std::vector<torch::Tensor> momentum(int i) const {
    std::vector<torch::Tensor> out;
    for (auto& p : nets_[i]->parameters()) {
      auto& s = opts_[i]->state().at(c10::guts::to_string(p.unsafeGetTensorImpl()));
      out.push_back(static_cast<torch::optim::SGDParamState&>(*s).momentum_buffer());
    }
    return out;
  }

  std::vector<TwoLayerNet> nets_;
  std::vector<std::unique_ptr<torch::optim::SGD>> opts_;
};

std::size_t parameter_bytes(const TwoLayerNet& net) {
  std::size_t n = 0;
  for (auto& p : net->parameters()) n += p.numel() * p.element_size();
  return n;
}

using StrategyTest = testing::WorldSizeTest;
using testing::world_name;

// --- local SGD ---------------------------------------------------------------------------------

using LocalSgdStrategyTest = StrategyTest;

void expect_local_sgd_like_reference(int world, bool average_state) {
  const int steps = 10, period = 4;
  const TwoLayerNet init = initial_net(21);
  const Rows data = make_data(steps * world * kRows);
  Replicas ref(init, world);
  std::vector<std::vector<torch::Tensor>> want(steps);
  for (int k = 0; k < steps; ++k) {
    ref.backward(data, k);
    ref.step();
    if ((k + 1) % period == 0) {
      auto mean = ref.mean();
      for (int i = 0; i < world; ++i) ref.set(i, mean);
      if (average_state) ref.average_momentum();
    }
    for (int i = 0; i < world; ++i) want[k].push_back(ref.get(i));
  }
  const double distance = ref.distance_to(ref.mean());
  const auto reconciled = ref.mean();

  auto got = collect(world, [&](comm::Communicator& comm) {
    LocalSgdStrategy strategy(comm, {.period = period, .average_optimizer_state = average_state});
    return run_strategy(strategy, init, data, comm, steps);
  });
  Worst worst;
  for (int k = 0; k < steps; ++k) {
    for (int r = 0; r < world; ++r) {
      const double d = relative_difference(got[r].history[k], want[k][r]);
      worst.add(d);
      EXPECT_LE(d, kBound) << "step " << k + 1 << " rank " << r;
    }
    const bool averaged = (k + 1) % period == 0;
    for (int r = 1; r < world; ++r)
      EXPECT_EQ(torch::equal(got[r].history[k], got[0].history[k]), averaged)
          << "step " << k + 1 << " rank " << r << (averaged ? ": not bit-identical" : ": equal");
  }
  for (int r = 0; r < world; ++r) {
    worst.add(relative_difference(got[r].reconciled, reconciled));
    EXPECT_LE(relative_difference(got[r].reconciled, reconciled), kBound) << "rank " << r;
    EXPECT_TRUE(torch::equal(got[r].reconciled, got[0].reconciled)) << "rank " << r;
    EXPECT_NEAR(got[r].stats.consensus_distance, distance, kDistanceBound * distance)
        << "rank " << r;
  }
  EXPECT_GT(distance, 0);
  // Averages after steps 4 and 8 (parameters, and momentum when asked), then reconcile()'s
  // parameters and momentum.
  const std::size_t p = parameter_bytes(init);
  EXPECT_EQ(got[0].stats.bytes_sent, (average_state ? 4 : 2) * p + 2 * p);
}

TEST_P(LocalSgdStrategyTest, PeriodFourEqualsReplicasAveragedEveryFourSteps) {
  expect_local_sgd_like_reference(GetParam(), false);
}

TEST_P(LocalSgdStrategyTest, OptimizerStateIsAveragedWithTheParametersWhenAsked) {
  expect_local_sgd_like_reference(GetParam(), true);
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, LocalSgdStrategyTest, ::testing::Values(2, 3, 4), world_name);

// Compressed averages are approximate, but what reconcile() installs is the replicas' exact
// mean, as for plain local SGD: 6 steps with period 4 (a compressed average after step 4, then
// two local steps), then reconcile(). The difference to the mean computed here is a rounding:
// the all-reduce and this sum add the same N numbers in another order, each partial sum off by
// at most u = 2^-53 of the sum of magnitudes (Higham 4.2), so at most (N - 1) u times the
// largest replica element per element; N u of the mean's norm covers the whole vector with
// room (the replicas are close). A compressed reconcile (top-k of 10%) misses the change since
// the last average by most of its 90% unsent share.
TEST_P(LocalSgdStrategyTest, CompressedReconcileInstallsTheExactMean) {
  const int world = GetParam(), steps = 6;
  const TwoLayerNet init = initial_net(21);
  const Rows data = make_data(steps * world * kRows);
  for (const char* name : {"topk", "powersgd"}) {
    compress::CompressOptions compress;
    compress.name = name;
    compress.ratio = 0.1;
    compress.rank = 1;
    auto got = collect(world, [&](comm::Communicator& comm) {
      LocalSgdStrategy strategy(comm, {.period = 4, .compress = compress});
      return run_strategy(strategy, init, data, comm, steps);
    });
    auto mean = torch::zeros_like(got[0].history.back());
    for (const auto& r : got) mean += r.history.back();
    mean /= world;
    const double bound = world * 0x1p-53;
    for (int r = 0; r < world; ++r)
      EXPECT_LE(relative_difference(got[r].reconciled, mean), bound) << name << " rank " << r;
  }
}

// --- post-local SGD ----------------------------------------------------------------------------

using PostLocalSgdStrategyTest = StrategyTest;

TEST_P(PostLocalSgdStrategyTest, WarmupIsSynchronousSgdThenLocalSgd) {
  const int world = GetParam(), steps = 8, warmup = 3, period = 2;
  const TwoLayerNet init = initial_net(22);
  const Rows data = make_data(steps * world * kRows);
  Replicas ref(init, world);
  std::vector<std::vector<torch::Tensor>> want(steps);
  for (int k = 0; k < steps; ++k) {
    ref.backward(data, k);
    if (k < warmup) ref.average_gradients();
    ref.step();
    if (k >= warmup && (k + 1 - warmup) % period == 0) {
      auto mean = ref.mean();
      for (int i = 0; i < world; ++i) ref.set(i, mean);
    }
    for (int i = 0; i < world; ++i) want[k].push_back(ref.get(i));
  }
  const auto reconciled = ref.mean();

  auto got = collect(world, [&](comm::Communicator& comm) {
    PostLocalSgdStrategy strategy(
        comm,
        {.warmup_steps = warmup, .allreduce = {}, .local = {.period = period}, .compress = {}});
    return run_strategy(strategy, init, data, comm, steps);
  });
  Worst worst;
  for (int k = 0; k < steps; ++k) {
    for (int r = 0; r < world; ++r) {
      const double d = relative_difference(got[r].history[k], want[k][r]);
      worst.add(d);
      EXPECT_LE(d, kBound) << "step " << k + 1 << " rank " << r;
    }
    const bool identical = k < warmup || (k + 1 - warmup) % period == 0;
    for (int r = 1; r < world; ++r)
      EXPECT_EQ(torch::equal(got[r].history[k], got[0].history[k]), identical)
          << "step " << k + 1 << " rank " << r;
  }
  for (int r = 0; r < world; ++r) {
    worst.add(relative_difference(got[r].reconciled, reconciled));
    EXPECT_LE(relative_difference(got[r].reconciled, reconciled), kBound) << "rank " << r;
    EXPECT_TRUE(torch::equal(got[r].reconciled, got[0].reconciled)) << "rank " << r;
  }
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, PostLocalSgdStrategyTest, ::testing::Values(2, 3, 4),
                         world_name);

// --- EASGD -------------------------------------------------------------------------------------

using EasgdStrategyTest = StrategyTest;

TEST_P(EasgdStrategyTest, AlphaZeroIsIndependentSgdOnEachShard) {
  const int world = GetParam(), steps = 7;
  const TwoLayerNet init = initial_net(23);
  const Rows data = make_data(steps * world * kRows);
  Replicas ref(init, world);  // each replica is a single rank trained alone on its shards
  for (int k = 0; k < steps; ++k) {
    ref.backward(data, k);
    ref.step();
  }
  auto got = collect(world, [&](comm::Communicator& comm) {
    EasgdStrategy strategy(comm, {.period = 2, .alpha = 0});
    return run_strategy(strategy, init, data, comm, steps);
  });
  Worst worst;
  for (int r = 0; r < world; ++r) {
    const double d = relative_difference(got[r].history.back(), ref.get(r));
    worst.add(d);
    EXPECT_LE(d, kBound) << "rank " << r;
    // The centre never moved: reconcile() hands back the start.
    EXPECT_TRUE(torch::equal(got[r].reconciled, flatten(init))) << "rank " << r;
  }
}

TEST_P(EasgdStrategyTest, ElasticUpdateEqualsTheFormula) {
  const int world = GetParam(), steps = 7, period = 2;
  const double alpha = 0.2;  // world x alpha <= 0.8
  const TwoLayerNet init = initial_net(24);
  const Rows data = make_data(steps * world * kRows);
  Replicas ref(init, world);
  auto centre = flatten(init);
  std::vector<std::vector<torch::Tensor>> want(steps);
  for (int k = 0; k < steps; ++k) {
    ref.backward(data, k);
    ref.step();
    if ((k + 1) % period == 0) {
      auto mean = ref.mean();
      for (int i = 0; i < world; ++i) ref.set(i, ref.get(i) - alpha * (ref.get(i) - centre));
      centre = centre + alpha * world * (mean - centre);
    }
    for (int i = 0; i < world; ++i) want[k].push_back(ref.get(i));
  }
  const double distance = ref.distance_to(centre);

  auto got = collect(world, [&](comm::Communicator& comm) {
    EasgdStrategy strategy(comm, {.period = period, .alpha = alpha});
    return run_strategy(strategy, init, data, comm, steps);
  });
  Worst worst;
  for (int k = 0; k < steps; ++k)
    for (int r = 0; r < world; ++r) {
      const double d = relative_difference(got[r].history[k], want[k][r]);
      worst.add(d);
      EXPECT_LE(d, kBound) << "step " << k + 1 << " rank " << r;
    }
  for (int r = 0; r < world; ++r) {
    EXPECT_TRUE(torch::equal(got[r].centre, got[0].centre)) << "rank " << r;
    worst.add(relative_difference(got[r].reconciled, centre));
    EXPECT_LE(relative_difference(got[r].reconciled, centre), kBound) << "rank " << r;
    EXPECT_TRUE(torch::equal(got[r].reconciled, got[r].centre)) << "rank " << r;
    EXPECT_NEAR(got[r].stats.consensus_distance, distance, kDistanceBound * distance)
        << "rank " << r;
  }
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, EasgdStrategyTest, ::testing::Values(2, 3, 4), world_name);

TEST(EasgdConfig, AlphaTimesWorldSizeAboveOneIsAConfigError) {
  TrainConfig config;
  config.strategy.name = "easgd";
  config.strategy.alpha = 0.25;  // 4 x 0.25 = 1: the centre lands on the mean
  auto too_large = config;
  too_large.strategy.alpha = 0.3;
  std::mutex mutex;
  std::vector<std::string> errors(4);
  comm::local::run_ranks(4, {}, [&](comm::Communicator& comm) {
    EXPECT_NO_THROW(make_strategy(config, comm));
    try {
      make_strategy(too_large, comm);
    } catch (const ConfigError& e) {
      std::lock_guard lock(mutex);
      errors[comm.rank()] = e.what();
    }
  });
  for (auto& e : errors) {
    EXPECT_NE(e.find("strategy.alpha"), std::string::npos) << e;
    EXPECT_NE(e.find("4 ranks"), std::string::npos) << e;
  }
}

// --- gossip ------------------------------------------------------------------------------------

// W written out from the topology's description, independently of gossip_offsets().
std::vector<std::vector<double>> mixing_matrix(const std::string& topology, int n) {
  std::vector<std::vector<double>> w(n, std::vector<double>(n, 0));
  for (int i = 0; i < n; ++i) {
    if (topology == "complete") {
      for (int j = 0; j < n; ++j) w[i][j] = 1.0 / n;
    } else if (topology == "ring") {
      if (n == 1) w[i][i] = 1;
      if (n == 2) w[i][i] = w[i][1 - i] = 0.5;
      if (n >= 3) w[i][i] = w[i][(i + 1) % n] = w[i][(i + n - 1) % n] = 1.0 / 3;
    } else {  // exponential: i hears from i - 2^k for every 2^k < n
      int degree = 0;
      for (int hop = 1; hop < n; hop *= 2) ++degree;
      w[i][i] = 1.0 / (1 + degree);
      for (int hop = 1; hop < n; hop *= 2) w[i][(i - hop % n + n) % n] = 1.0 / (1 + degree);
    }
  }
  return w;
}

struct GossipCase {
  std::string topology;
  int world;
};

class GossipStrategyTest : public ::testing::TestWithParam<GossipCase> {
 protected:
  void SetUp() override { torch::set_num_threads(1); }
};

TEST_P(GossipStrategyTest, EqualsTheMixingFormulaThenReconcilesToTheAverage) {
  const auto& [topology, world] = GetParam();
  const int steps = 6;
  const auto w = mixing_matrix(topology, world);
  for (int j = 0; j < world; ++j) {  // doubly stochastic: the average is preserved
    double column = 0;
    for (int i = 0; i < world; ++i) column += w[i][j];
    ASSERT_NEAR(column, 1, 1e-12) << "column " << j;
  }
  const TwoLayerNet init = initial_net(25);
  const Rows data = make_data(steps * world * kRows);
  Replicas ref(init, world);
  std::vector<std::vector<torch::Tensor>> want(steps);
  for (int k = 0; k < steps; ++k) {
    std::vector<torch::Tensor> before;
    for (int i = 0; i < world; ++i) before.push_back(ref.get(i));
    ref.backward(data, k);
    ref.step();
    for (int i = 0; i < world; ++i) {
      auto mixed = torch::zeros_like(before[i]);
      for (int j = 0; j < world; ++j) mixed += w[i][j] * before[j];
      ref.set(i, mixed + (ref.get(i) - before[i]));
    }
    for (int i = 0; i < world; ++i) want[k].push_back(ref.get(i));
  }
  const auto mean = ref.mean();
  const double distance = ref.distance_to(mean);

  auto got = collect(world, [&](comm::Communicator& comm) {
    GossipStrategy strategy(comm, parse_gossip_topology(topology));
    return run_strategy(strategy, init, data, comm, steps);
  });
  Worst worst;
  for (int k = 0; k < steps; ++k)
    for (int r = 0; r < world; ++r) {
      const double d = relative_difference(got[r].history[k], want[k][r]);
      worst.add(d);
      EXPECT_LE(d, kBound) << "step " << k + 1 << " rank " << r;
    }
  for (int r = 0; r < world; ++r) {
    worst.add(relative_difference(got[r].reconciled, mean));
    EXPECT_LE(relative_difference(got[r].reconciled, mean), kBound) << "rank " << r;
    // Consensus distance 0 after reconcile(): one model, bit for bit.
    EXPECT_TRUE(torch::equal(got[r].reconciled, got[0].reconciled)) << "rank " << r;
    EXPECT_NEAR(got[r].stats.consensus_distance, distance, kDistanceBound * distance)
        << "rank " << r;
  }
  EXPECT_GT(distance, 0);
  // Every step sends the parameters to each out-neighbour; reconcile() averages the
  // parameters and the momentum.
  const std::size_t p = parameter_bytes(init);
  const std::size_t neighbours = gossip_offsets(parse_gossip_topology(topology), world).size();
  EXPECT_EQ(got[0].stats.bytes_sent, steps * neighbours * p + 2 * p);
}

INSTANTIATE_TEST_SUITE_P(Topologies, GossipStrategyTest,
                         ::testing::Values(GossipCase{"complete", 2}, GossipCase{"complete", 3},
                                           GossipCase{"complete", 4}, GossipCase{"ring", 2},
                                           GossipCase{"ring", 3}, GossipCase{"ring", 4},
                                           GossipCase{"ring", 5}, GossipCase{"exponential", 3},
                                           GossipCase{"exponential", 4},
                                           GossipCase{"exponential", 5},
                                           GossipCase{"exponential", 8}),
                         [](const auto& info) {
                           return info.param.topology + "_np" + std::to_string(info.param.world);
                         });

using GossipMixingTest = StrategyTest;

TEST_P(GossipMixingTest, OneCompleteMixingStepIsTheAllreduceAverage) {
  const int world = GetParam();
  const TwoLayerNet init = initial_net(26);
  std::mutex mutex;
  std::vector<double> differences(world);
  comm::local::run_ranks(world, {}, [&](comm::Communicator& comm) {
    TwoLayerNet net = copy_of(init);
    torch::optim::SGD opt(net->parameters(), sgd_options());
    GossipStrategy strategy(comm, GossipTopology::complete);
    strategy.setup(nn::tensors_of(*net));
    {  // replicas apart, as after local steps
      torch::NoGradGuard no_grad;
      auto gen = torch::make_generator<at::CPUGeneratorImpl>(100 + comm.rank());
      for (auto& p : net->parameters()) p.add_(torch::randn(p.sizes(), gen));
    }
    auto average = flatten(net);
    comm.allreduce(buffer_of(average), {.op = comm::ReduceOp::avg});
    strategy.before_backward(true);
    strategy.before_optimizer_step();
    strategy.after_optimizer_step(opt, 1);  // no update: a mixing step alone
    std::lock_guard lock(mutex);
    differences[comm.rank()] = relative_difference(flatten(net), average);
  });
  Worst worst;
  for (int r = 0; r < world; ++r) {
    worst.add(differences[r]);
    EXPECT_LE(differences[r], kBound) << "rank " << r;
  }
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, GossipMixingTest, ::testing::Values(2, 3, 4), world_name);

}  // namespace
}  // namespace distml::train
