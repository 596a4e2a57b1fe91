// Megatron-style tensor parallelism against the dense layers: a column-parallel then a
// row-parallel Linear split over T = 2 and 4 local ranks must give every rank the dense output,
// and slices of the dense gradients (the input's too, which needs the backward all-reduce).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <mutex>

#include "distml/comm/local/local_world.h"
#include "distml/core/error.h"
#include "distml/train/tensor_parallel/parallel_linear.h"

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

TEST(TensorParallel, AWidthThatDoesNotSplitIsRefused) {
  torch::nn::Linear a(4, 6);
  comm::local::run_ranks(4, {}, [&](comm::Communicator& comm) {
    EXPECT_THROW(ColumnParallelLinear(a, comm), ConfigError);
  });
}

}  // namespace
}  // namespace distml::train
