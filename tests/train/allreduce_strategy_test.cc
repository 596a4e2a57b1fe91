// Synchronous data parallelism against its single-process reference: N ranks with batch B
// each must follow exactly the trajectory of one rank with the N*B batch.
#include "distml/train/strategies/allreduce_strategy.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <chrono>  // the collective timeout
#include <functional>
#include <mutex>

#include "distml/comm/local/local_world.h"
#include "distml/train/strategies/zero_strategy.h"

namespace distml::train {
namespace {

struct NetImpl : torch::nn::Module {
  NetImpl() {
    fc1 = register_module("fc1", torch::nn::Linear(12, 16));
    fc2 = register_module("fc2", torch::nn::Linear(16, 3));
    spare = register_parameter("spare", torch::zeros({4}));  // used only when asked
  }
  torch::Tensor forward(torch::Tensor x, bool use_spare = false) {
    auto y = fc2(torch::relu(fc1(x)));
    if (use_spare) y = y + spare.sum();
    return y;
  }
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
  torch::Tensor spare;
};
TORCH_MODULE(Net);

struct Data {
  torch::Tensor x, y;
};

Data global_batch(int rows) {
  auto gen = torch::make_generator<at::CPUGeneratorImpl>(7);
  return {torch::randn({rows, 12}, gen), torch::randint(0, 3, {rows}, gen)};
}

// Copies `from`'s parameters into a fresh Net; `noise` perturbs them (ranks other than 0
// start from different values, which setup() must overwrite).
Net copy_of(const Net& from, double noise, std::uint64_t seed) {
  Net net;
  torch::NoGradGuard no_grad;
  auto gen = torch::make_generator<at::CPUGeneratorImpl>(seed);
  auto src = from->parameters(), dst = net->parameters();
  for (std::size_t i = 0; i < src.size(); ++i)
    dst[i].copy_(src[i] + noise * torch::randn(src[i].sizes(), gen));
  return net;
}

using MakeStrategy = std::function<std::unique_ptr<Strategy>(comm::Communicator&)>;

MakeStrategy allreduce(AllreduceStrategyOptions options = {}) {
  return [options](comm::Communicator& comm) {
    return std::make_unique<AllreduceStrategy>(comm, options);
  };
}

MakeStrategy zero(int stage) {
  return [stage](comm::Communicator& comm) {
    return std::make_unique<ZeroStrategy>(comm, ZeroStrategyOptions{.stage = stage});
  };
}

std::vector<torch::Tensor> train(Net net, comm::Communicator* comm, const Data& data, int rows,
                                 int steps, int micro_steps, bool use_spare,
                                 const MakeStrategy& make = allreduce()) {
  torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  std::unique_ptr<Strategy> strategy;
  int rank = 0, world = 1;
  if (comm) {
    strategy = make(*comm);
    strategy->setup(nn::tensors_of(*net));
    rank = comm->rank();
    world = comm->size();
  }
  const int per_rank = rows / world, per_micro = per_rank / micro_steps;
  for (int step = 0; step < steps; ++step) {
    opt.zero_grad();
    for (int m = 0; m < micro_steps; ++m) {
      const int begin = rank * per_rank + m * per_micro;
      auto x = data.x.narrow(0, begin, per_micro), y = data.y.narrow(0, begin, per_micro);
      if (strategy) strategy->before_backward(m == micro_steps - 1);
      auto loss = torch::nn::functional::cross_entropy(net->forward(x, use_spare), y) / micro_steps;
      loss.backward();
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
  return out;
}

// Runs `rank_train(comm)` on `world` local ranks and expects every rank's final parameters
// to match `want` (declared tolerance: 1e-5 relative, 1e-6 absolute, float32 round-off).
template <class Fn>
void expect_every_rank_matches(int world, const std::vector<torch::Tensor>& want, Fn rank_train) {
  std::mutex mutex;
  std::vector<std::vector<torch::Tensor>> got(world);
  comm::local::run_ranks(world, {}, [&](comm::Communicator& comm) {
    auto params = rank_train(comm);
    std::lock_guard lock(mutex);
    got[comm.rank()] = params;
  });
  for (int r = 0; r < world; ++r)
    for (std::size_t i = 0; i < want.size(); ++i)
      EXPECT_TRUE(torch::allclose(got[r][i], want[i], 1e-5, 1e-6))
          << "rank " << r << " parameter " << i << " differs by "
          << (got[r][i] - want[i]).abs().max().item<double>();
}

class AllreduceStrategyTest : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override { torch::set_num_threads(1); }
};

TEST_P(AllreduceStrategyTest, NRanksEqualOneRankOnTheNTimesBatch) {
  const int rows = 24, steps = 6;
  torch::manual_seed(3);
  Net init;
  Data data = global_batch(rows);
  auto want = train(copy_of(init, 0, 0), nullptr, data, rows, steps, 1, true);
  // Tiny buckets, so that several all-reduces overlap backward and launch in order.
  AllreduceStrategyOptions options;
  options.first_bucket_bytes = 64;
  options.bucket_bytes = 256;
  expect_every_rank_matches(GetParam(), want, [&](comm::Communicator& comm) {
    // Ranks other than 0 start elsewhere: setup() must give them rank 0's parameters.
    return train(copy_of(init, comm.rank() == 0 ? 0.0 : 0.5, comm.rank()), &comm, data, rows, steps,
                 1, true, allreduce(options));
  });
}

TEST_P(AllreduceStrategyTest, GradientAccumulationEqualsTheWholeBatch) {
  const int rows = 24, steps = 4;
  torch::manual_seed(4);
  Net init;
  Data data = global_batch(rows);
  auto want = train(copy_of(init, 0, 0), nullptr, data, rows, steps, 1, true);
  expect_every_rank_matches(GetParam(), want, [&](comm::Communicator& comm) {
    return train(copy_of(init, 0, 0), &comm, data, rows, steps, 2, true);
  });
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, AllreduceStrategyTest, ::testing::Values(1, 2, 3, 4),
                         [](const auto& info) { return "np" + std::to_string(info.param); });

// The errors `world` ranks end with when rank r trains one step of `make`'s strategy with the
// spare parameter in use where `uses_spare(r)` (and without it elsewhere), under a 60 s
// collective timeout.
template <class UsesSpare>
std::vector<std::string> errors_of_one_step(int world, const MakeStrategy& make,
                                            UsesSpare uses_spare) {
  torch::set_num_threads(1);
  torch::manual_seed(5);
  Net init;
  Data data = global_batch(12);
  std::mutex mutex;
  std::vector<std::string> errors(world);
  comm::CommOptions options;
  options.timeout = std::chrono::seconds(60);
  comm::local::run_ranks(world, options, [&](comm::Communicator& comm) {
    try {
      train(copy_of(init, 0, 0), &comm, data, 12, 1, 1, uses_spare(comm.rank()), make);
    } catch (const Error& e) {
      std::lock_guard lock(mutex);
      errors[comm.rank()] = e.what();
    }
  });
  return errors;
}

TEST(AllreduceStrategy, ParameterWithoutGradientIsNamedNotAHang) {
  for (auto& e : errors_of_one_step(2, allreduce(), [](int) { return false; }))
    EXPECT_NE(e.find("parameter 'spare' got no gradient"), std::string::npos) << e;
}

// A data-dependent branch leaves a parameter without gradient on one rank only: that rank
// names it, and the others say another rank lacked one, instead of waiting out the collective
// timeout (which would end them with a TimeoutError about the collective). For ZeRO stage 2
// the reduced flag reaches one rank only (the owner of its block), so the missing rank is
// taken first and last at 2 and 3 ranks: the flag travels from whichever rank owns it.
TEST(AllreduceStrategy, AGradientMissingOnOneRankStopsEveryRankAtOnce) {
  const std::vector<std::pair<std::string, MakeStrategy>> strategies = {
      {"allreduce", allreduce()}, {"zero1", zero(1)}, {"zero2", zero(2)}};
  for (const auto& [name, make] : strategies)
    for (int world : {2, 3})
      for (int missing : {0, world - 1}) {
        const auto errors =
            errors_of_one_step(world, make, [&](int rank) { return rank != missing; });
        for (int r = 0; r < world; ++r)
          EXPECT_NE(errors[r].find(r == missing ? "parameter 'spare' got no gradient"
                                                : "got no gradient on another rank"),
                    std::string::npos)
              << name << " at " << world << " ranks, rank " << r << ": " << errors[r];
      }
}

// A second backward in one synchronising step would write into buckets already on their
// way: refused, naming a parameter. Gradient accumulation goes through before_backward(false).
TEST(AllreduceStrategy, ASecondBackwardInOneStepIsRefused) {
  torch::manual_seed(8);
  Net net;
  Data data = global_batch(4);
  comm::local::run_ranks(1, {}, [&](comm::Communicator& comm) {
    AllreduceStrategy strategy(comm);
    strategy.setup(nn::tensors_of(*net));
    strategy.before_backward(true);
    torch::nn::functional::cross_entropy(net->forward(data.x, true), data.y).backward();
    try {
      torch::nn::functional::cross_entropy(net->forward(data.x, true), data.y).backward();
      ADD_FAILURE() << "a second backward was accepted";
    } catch (const std::exception& e) {
      EXPECT_NE(std::string(e.what()).find("got a second gradient in one step"), std::string::npos)
          << e.what();
    }
  });
}

// The hooks go with the strategy: the model outlives it and trains on without it.
TEST(AllreduceStrategy, TheModelOutlivesTheStrategy) {
  torch::manual_seed(9);
  Net net;
  Data data = global_batch(4);
  comm::local::run_ranks(1, {}, [&](comm::Communicator& comm) {
    { AllreduceStrategy(comm).setup(nn::tensors_of(*net)); }
    net->zero_grad();
    torch::nn::functional::cross_entropy(net->forward(data.x, true), data.y).backward();
    for (auto& p : net->parameters()) EXPECT_TRUE(p.grad().defined());
  });
}

TEST(AllreduceStrategy, UnusedParametersCanBeAllowed) {
  torch::set_num_threads(1);
  torch::manual_seed(6);
  Net init;
  Data data = global_batch(8);
  auto want = train(copy_of(init, 0, 0), nullptr, data, 8, 3, 1, false);
  AllreduceStrategyOptions options;
  options.find_unused_parameters = true;
  comm::local::run_ranks(2, {}, [&](comm::Communicator& comm) {
    auto got = train(copy_of(init, 0, 0), &comm, data, 8, 3, 1, false, allreduce(options));
    for (std::size_t i = 0; i < want.size(); ++i)
      EXPECT_TRUE(torch::allclose(got[i], want[i], 1e-5, 1e-6));
  });
}

TEST(AllreduceStrategy, DifferentModelsAreACommErrorOnEveryRank) {
  std::vector<std::string> errors(2);
  std::mutex mutex;
  comm::local::run_ranks(2, {}, [&](comm::Communicator& comm) {
    std::shared_ptr<torch::nn::Module> model;
    if (comm.rank() == 0)
      model = torch::nn::Linear(4, 2).ptr();
    else
      model = torch::nn::Linear(4, 3).ptr();
    AllreduceStrategy strategy(comm);
    try {
      strategy.setup(nn::tensors_of(*model));
    } catch (const CommError& e) {
      std::lock_guard lock(mutex);
      errors[comm.rank()] = e.what();
    }
  });
  for (auto& e : errors) EXPECT_NE(e.find("differ from rank 0"), std::string::npos) << e;
}

}  // namespace
}  // namespace distml::train
