// Megatron-style tensor parallelism against the dense layers: a column-parallel then a
// row-parallel Linear split over T = 2 and 4 local ranks must give every rank the dense output,
// and slices of the dense gradients (the input's too, which needs the backward all-reduce).
// Then whole models split by SplitLayers (the mlp, LeNet-5): the same output and, after an
// optimizer step on every rank's slices, the same model once the slices are gathered.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <mutex>

#include "distml/comm/local/local_world.h"
#include "distml/core/error.h"
#include "distml/nn/model_registry.h"
#include "distml/train/tensor_parallel/parallel_linear.h"
#include "distml/train/tensor_parallel/split_layers.h"

namespace distml::train {
namespace {

using tensor_parallel::ColumnParallelLinear;
using tensor_parallel::RowParallelLinear;

// Float64. Splitting the hidden width into T parts regroups the sum over it in B (T partial
// sums, then their sum): a few ulps of the largest term, 1e-15 relative; 1e-12 leaves a
// factor 1000, while a missing all-reduce leaves (T - 1)/T of a value out.
constexpr double kTolerance = 1e-12;

double worst(const torch::Tensor& got, const torch::Tensor& want) {
  return (got - want).abs().max().item<double>() /
         std::max(1e-300, want.abs().max().item<double>());
}

TEST(TensorParallel, AColumnThenARowPairEqualsTheDenseLayers) {
  torch::set_num_threads(1);
  torch::manual_seed(3);
  torch::nn::Linear a(784, 64), b(64, 10);
  a->to(torch::kFloat64);
  b->to(torch::kFloat64);
  auto gen = torch::make_generator<at::CPUGeneratorImpl>(4);
  const auto x = torch::randn({6, 784}, gen, torch::kFloat64);
  const auto labels = torch::randint(0, 10, {6}, gen);
  // The dense reference.
  auto x_dense = x.clone().requires_grad_(true);
  const auto y_dense = b(torch::relu(a(x_dense)));
  torch::nn::functional::cross_entropy(y_dense, labels).backward();
  for (int ranks : {2, 4}) {
    std::mutex mutex;
    comm::local::run_ranks(ranks, {}, [&](comm::Communicator& comm) {
      ColumnParallelLinear column(a, comm);
      RowParallelLinear row(b, comm);
      auto x_own = x.clone().requires_grad_(true);
      const auto y = row(torch::relu(column(x_own)));
      torch::nn::functional::cross_entropy(y, labels).backward();
      const auto slice = [&](const torch::Tensor& t, std::int64_t dim) {
        return tensor_parallel::slice_for_rank(t, dim, comm);
      };
      std::lock_guard lock(mutex);
      const std::string where = cat(ranks, " ranks, rank ", comm.rank(), ": ");
      EXPECT_LE(worst(y, y_dense), kTolerance) << where << "output";
      EXPECT_LE(worst(x_own.grad(), x_dense.grad()), kTolerance) << where << "input gradient";
      EXPECT_LE(worst(column->weight.grad(), slice(a->weight.grad(), 0)), kTolerance) << where;
      EXPECT_LE(worst(column->bias.grad(), slice(a->bias.grad(), 0)), kTolerance) << where;
      EXPECT_LE(worst(row->weight.grad(), slice(b->weight.grad(), 1)), kTolerance) << where;
      EXPECT_LE(worst(row->bias.grad(), b->bias.grad()), kTolerance) << where;
    });
  }
}

// One model per rank, from one seed, as every process of a run builds its own.
nn::Model seeded(const nn::ModelOptions& options) {
  static std::mutex mutex;  // torch's default generator is process-wide
  std::lock_guard lock(mutex);
  torch::manual_seed(5);
  auto model = nn::make_model(options);
  model.to(torch::kFloat64);
  return model;
}

// One SGD step on the whole model, and on its split over T ranks: the same output, and after
// the step and the gather, the same weights.
void expect_split_matches(const nn::ModelOptions& options, const torch::Tensor& x, int pairs) {
  const auto labels = torch::arange(x.size(0)) % 5;
  constexpr double kLr = 0.1;
  auto whole = seeded(options);
  const auto y_whole = whole.forward(x);
  torch::nn::functional::cross_entropy(y_whole, labels).backward();
  {
    torch::NoGradGuard no_grad;
    for (auto& p : whole.parameters()) p.sub_(kLr * p.grad());
  }
  for (int ranks : {2, 4}) {
    std::mutex mutex;
    comm::local::run_ranks(ranks, {}, [&](comm::Communicator& comm) {
      auto model = seeded(options);
      const auto layers = model.layers();
      EXPECT_EQ(tensor_parallel::splittable_pairs(layers), pairs);
      tensor_parallel::SplitLayers split(layers, model.tensors(), comm);
      const auto y = nn::run_layers(split.layers(), x);
      torch::nn::functional::cross_entropy(y, labels).backward();
      {
        torch::NoGradGuard no_grad;
        for (auto& p : split.tensors().parameters) p.sub_(kLr * p.grad());
      }
      split.gather_into_whole();
      std::lock_guard lock(mutex);
      const std::string where = cat(options.name, ", ", ranks, " ranks, rank ", comm.rank());
      EXPECT_LE(worst(y, y_whole), kTolerance) << where << ": output";
      const auto got = model.named_parameters(), want = whole.named_parameters();
      for (const auto& [name, p] : want.pairs())
        EXPECT_LE(worst(got[name], p), kTolerance) << where << ": " << name;
    });
  }
}

TEST(TensorParallel, ASplitMlpTrainsLikeTheWholeOne) {
  torch::set_num_threads(1);
  auto gen = torch::make_generator<at::CPUGeneratorImpl>(6);
  // Two pairs (16 -> 24 -> 12, 12 -> 8 -> 5): every hidden width divides by 2 and 4.
  expect_split_matches({.name = "mlp", .mlp_layers = {16, 24, 12, 8, 5}},
                       torch::randn({6, 16}, gen, torch::kFloat64), 2);
}

TEST(TensorParallel, LeNet5SplitsItsFullyConnectedLayers) {
  torch::set_num_threads(1);
  auto gen = torch::make_generator<at::CPUGeneratorImpl>(7);
  // fc1 (column) with fc2 (row) over 120 hidden units; the convolutions and fc3 stay whole.
  expect_split_matches({.name = "lenet5", .num_classes = 5},
                       torch::randn({4, 1, 28, 28}, gen, torch::kFloat64), 1);
}

TEST(TensorParallel, AWidthThatDoesNotSplitIsRefused) {
  torch::nn::Linear a(4, 6);
  comm::local::run_ranks(4, {}, [&](comm::Communicator& comm) {
    EXPECT_THROW(ColumnParallelLinear(a, comm), ConfigError);
  });
}

}  // namespace
}  // namespace distml::train
