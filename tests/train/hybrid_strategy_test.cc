// The sparse/dense hybrid against its single-process reference: N ranks with batch B each,
// the embedding's rows served by their owners and the rest all-reduced, must follow exactly
// the trajectory of one rank with plain SGD on the N*B batch.
#include "distml/train/strategies/hybrid_strategy.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <mutex>

#include "distml/comm/local/local_world.h"
#include "distml/nn/fasttext.h"
#include "distml/train/data_parallel.h"

namespace distml::train::hybrid_test {
namespace {

constexpr std::int64_t kBuckets = 40, kDim = 6, kClasses = 3, kLength = 5;

// An embedding bag (sparse gradient, row 0 padding) and a classifier, in float64 so that the
// comparison below is one of summation order alone.
struct BagNetImpl : torch::nn::Module {
  BagNetImpl() {
    bag = register_module("bag",
                          torch::nn::EmbeddingBag(torch::nn::EmbeddingBagOptions(kBuckets, kDim)
                                                      .mode(torch::kMean)
                                                      .padding_idx(0)
                                                      .sparse(true)));
    fc = register_module("fc", torch::nn::Linear(kDim, kClasses));
    to(torch::kFloat64);
  }
  torch::Tensor forward(const torch::Tensor& ids) { return fc(bag(ids)); }
  torch::nn::EmbeddingBag bag{nullptr};
  torch::nn::Linear fc{nullptr};
};
TORCH_MODULE(BagNet);

struct Data {
  torch::Tensor ids, y;
};

// Ids drawn so that rows repeat within and across ranks' batches, with padding among them.
Data global_batch(int rows) {
  auto gen = torch::make_generator<at::CPUGeneratorImpl>(11);
  return {torch::randint(0, kBuckets / 2, {rows, kLength}, gen).to(torch::kLong),
          torch::randint(0, kClasses, {rows}, gen).to(torch::kLong)};
}

BagNet copy_of(const BagNet& from, double noise, std::uint64_t seed) {
  BagNet net;
  torch::NoGradGuard no_grad;
  auto gen = torch::make_generator<at::CPUGeneratorImpl>(seed);
  auto src = from->parameters(), dst = net->parameters();
  for (std::size_t i = 0; i < src.size(); ++i)
    dst[i].copy_(src[i] + noise * torch::randn(src[i].sizes(), gen).to(torch::kFloat64));
  return net;
}

// `steps` of SGD (lr 0.5) on this rank's rows of `data`, in `micro_steps` pieces, through the
// hybrid when `comm` is set; returns the parameters and the bytes the strategy sent.
std::pair<std::vector<torch::Tensor>, std::size_t> train(BagNet net, comm::Communicator* comm,
                                                         const Data& data, int steps,
                                                         int micro_steps) {
  torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(0.5));
  std::unique_ptr<HybridStrategy> strategy;
  const int rows = static_cast<int>(data.y.size(0));
  const int world = comm ? comm->size() : 1, rank = comm ? comm->rank() : 0;
  if (comm) {
    // Tiny buckets, so that the dense part all-reduces in several pieces.
    AllreduceStrategyOptions dense;
    dense.first_bucket_bytes = 64;
    dense.bucket_bytes = 128;
    strategy = std::make_unique<HybridStrategy>(*comm, HybridStrategyOptions{.dense = dense});
    strategy->setup(nn::tensors_of(*net));
  }
  const int per_rank = rows / world, per_micro = per_rank / micro_steps;
  for (int step = 0; step < steps; ++step) {
    opt.zero_grad();
    for (int m = 0; m < micro_steps; ++m) {
      const int begin = rank * per_rank + m * per_micro;
      if (strategy) strategy->before_backward(m == micro_steps - 1);
      auto loss = torch::nn::functional::cross_entropy(
          net->forward(data.ids.narrow(0, begin, per_micro)), data.y.narrow(0, begin, per_micro));
      (loss / micro_steps).backward();
    }
    if (strategy) {
      strategy->before_optimizer_step();
      strategy->optimizer_step(opt);
    } else {
      opt.step();
    }
  }
  std::vector<torch::Tensor> out;
  for (auto& p : net->parameters()) out.push_back(p.detach().clone());
  return {out, strategy ? strategy->stats().bytes_sent : 0};
}

// Every rank's parameters against the reference. Float64 sums of at most 24 * 5 terms of size
// below 10 in another order differ by at most ~120 * 2^-52 * 10 ~ 3e-13 per step; over 6 steps
// with lr 0.5 that stays below 1e-11. 1e-9 leaves a wide margin and still fails for any wrong
// row, scale or learning rate (those move parameters by 1e-3 or more).
void expect_every_rank_matches(int world, int micro_steps) {
  torch::manual_seed(3);
  BagNet init;
  const Data data = global_batch(24);
  const int steps = 6;
  const auto want = train(copy_of(init, 0, 0), nullptr, data, steps, 1).first;
  std::mutex mutex;
  std::vector<std::vector<torch::Tensor>> got(world);
  comm::local::run_ranks(world, {}, [&](comm::Communicator& comm) {
    // Ranks other than 0 start elsewhere: setup() must give them rank 0's model.
    auto params = train(copy_of(init, comm.rank() == 0 ? 0.0 : 0.5, comm.rank()), &comm, data,
                        steps, micro_steps)
                      .first;
    std::lock_guard lock(mutex);
    got[comm.rank()] = params;
  });
  for (int r = 0; r < world; ++r)
    for (std::size_t i = 0; i < want.size(); ++i)
      EXPECT_TRUE(torch::allclose(got[r][i], want[i], 0, 1e-9))
          << "rank " << r << " parameter " << i << " differs by "
          << (got[r][i] - want[i]).abs().max().item<double>();
  // Something moved: the comparison is not of two untrained models.
  EXPECT_GT((want[0] - init->parameters()[0]).abs().max().item<double>(), 1e-3);
}

class HybridStrategyTest : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override { torch::set_num_threads(1); }
};

TEST_P(HybridStrategyTest, NRanksEqualOneRankOnTheNTimesBatch) {
  expect_every_rank_matches(GetParam(), 1);
}

TEST_P(HybridStrategyTest, GradientAccumulationEqualsTheWholeBatch) {
  expect_every_rank_matches(GetParam(), 2);
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, HybridStrategyTest, ::testing::Values(1, 2, 3, 4),
                         [](const auto& info) { return "np" + std::to_string(info.param); });

// Three ranks touch rows {1, 2 + r} of a 10 x 2 table with gradient rows of ones; owners are
// row mod 3. The table moves by lr * (ranks touching the row) / 3 on those rows only, and each
// rank sends: the counts (2 x 3 x 8 bytes), its pairs for other owners and its updated rows,
// (8 + 2 x 4) bytes each.
TEST(RowShardedTable, OwnersAverageAndPublishTheTouchedRows) {
  const auto initial = torch::arange(20, torch::kFloat32).reshape({10, 2});
  std::mutex mutex;
  std::vector<std::size_t> bytes(3);
  comm::local::run_ranks(3, {}, [&](comm::Communicator& comm) {
    const int r = comm.rank();
    auto table = initial.clone();
    RowShardedTable shards(comm, table, 64);
    auto grad = torch::zeros({10, 2});
    grad[1].fill_(1);
    grad[2 + r].fill_(1);
    const auto sent = shards.step(grad, 0.3);
    auto want = initial.clone();
    want[1] -= 0.3 * 3 / 3;
    for (int row : {2, 3, 4}) want[row] -= 0.3 / 3;
    EXPECT_TRUE(torch::allclose(table, want)) << "rank " << r << ":\n" << table;
    std::lock_guard lock(mutex);
    bytes[r] = sent;
  });
  // Owners: row 1 -> rank 1, 2 -> 2, 3 -> 0, 4 -> 1. Pairs sent to another owner: rank 0 both
  // of its rows (1, 2), rank 1 one (3), rank 2 both (1, 4). Updated rows each rank owns:
  // rank 0 {3}, rank 1 {1, 4}, rank 2 {2}.
  const std::size_t counts = 2 * 3 * 8, pair = 8 + 2 * 4;
  EXPECT_EQ(bytes[0], counts + 2 * pair + 1 * pair);
  EXPECT_EQ(bytes[1], counts + 1 * pair + 2 * pair);
  EXPECT_EQ(bytes[2], counts + 2 * pair + 1 * pair);
}

TEST(HybridStrategy, FastTextMarksItsEmbeddingSparse) {
  nn::FastText model(100, 8, 3);
  EXPECT_EQ(nn::tensors_of(*model).sparse_names, std::vector<std::string>{"embedding.weight"});
}

TEST(HybridStrategy, AModelWithoutSparseParametersIsAConfigError) {
  comm::local::run_ranks(1, {}, [&](comm::Communicator& comm) {
    HybridStrategy strategy(comm);
    torch::nn::Linear dense(4, 2);
    EXPECT_THROW(strategy.setup(nn::tensors_of(*dense)), ConfigError);
  });
}

// A loop of one's own builds its optimizer itself: the hybrid checks that one, not defaults.
TEST(HybridStrategy, DataParallelRefusesAnOptimizerTheRowsCannotFollow) {
  comm::local::run_ranks(1, {}, [&](comm::Communicator& comm) {
    BagNet net;
    torch::optim::SGD momentum(net->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
    try {
      DataParallel dp(*net, momentum, comm, {.name = "hybrid"});
      ADD_FAILURE() << "momentum SGD was accepted";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("optim.momentum"), std::string::npos) << e.what();
    }
    torch::optim::SGD plain(net->parameters(), torch::optim::SGDOptions(0.1));
    DataParallel dp(*net, plain, comm, {.name = "hybrid"});
  });
}

}  // namespace
}  // namespace distml::train::hybrid_test
