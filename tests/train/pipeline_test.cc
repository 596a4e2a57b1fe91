// Pipeline parallelism against its references: the schedules' orders, the partitioner against
// exhaustive search, and one step of every schedule at 2, 3 and 4 stages against the whole
// model's gradients on the same batch.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <limits>
#include <numeric>
#include <random>

#include "distml/core/error.h"
#include "distml/train/pipeline/partition.h"
#include "distml/train/pipeline/schedule.h"
#include "pipeline_fixture.h"

namespace distml::train {
namespace {

using pipeline::PipeStep;
using pipeline::stage_schedule;
using testing::PipelineCase;

std::string text(const std::vector<PipeStep>& steps) {
  std::string s;
  for (const auto& p : steps) {
    if (!s.empty()) s += ' ';
    s += p.forward ? 'F' : 'B';
    s += std::to_string(p.micro);
  }
  return s;
}

TEST(PipelineSchedule, GpipeFillsThenDrainsInReverse) {
  EXPECT_EQ(text(stage_schedule("gpipe", 3, 1, 3)), "F0 F1 F2 B2 B1 B0");
}

TEST(PipelineSchedule, OneForwardOneBackwardAfterTheWarmUp) {
  EXPECT_EQ(text(stage_schedule("1f1b", 2, 0, 4)), "F0 F1 B0 F2 B1 F3 B2 B3");
  EXPECT_EQ(text(stage_schedule("1f1b", 2, 1, 4)), "F0 B0 F1 B1 F2 B2 F3 B3");
  EXPECT_EQ(text(stage_schedule("1f1b", 4, 0, 2)), "F0 F1 B0 B1");  // warm-up longer than m
}

// Every schedule runs each micro-batch's forward once, before its backward once, and 1f1b
// holds at most S - s micro-batches at stage s.
TEST(PipelineSchedule, EveryMicroBatchOnceForwardBeforeBackward) {
  for (const std::string name : {"gpipe", "1f1b"})
    for (int stages = 1; stages <= 5; ++stages)
      for (int stage = 0; stage < stages; ++stage)
        for (int m = 1; m <= 9; ++m) {
          const auto steps = stage_schedule(name, stages, stage, m);
          std::vector<int> forward(m, -1), backward(m, -1);
          int held = 0, peak = 0;
          for (int t = 0; t < static_cast<int>(steps.size()); ++t) {
            auto& seen = steps[t].forward ? forward : backward;
            EXPECT_EQ(seen[steps[t].micro], -1) << name << " repeats " << text(steps);
            seen[steps[t].micro] = t;
            held += steps[t].forward ? 1 : -1;
            peak = std::max(peak, held);
          }
          for (int i = 0; i < m; ++i) {
            EXPECT_GE(forward[i], 0) << name;
            EXPECT_GT(backward[i], forward[i]) << name << ": " << text(steps);
          }
          if (name == "1f1b") {
            EXPECT_LE(peak, std::max(1, std::min(m, stages - stage))) << text(steps);
          }
        }
  EXPECT_THROW(stage_schedule("zigzag", 2, 0, 2), ConfigError);
}

// The smallest largest-stage cost over every way to cut, by brute force.
double best_by_exhaustive_search(const std::vector<double>& costs, int stages) {
  const int n = static_cast<int>(costs.size());
  double best = std::numeric_limits<double>::infinity();
  std::vector<int> cuts(stages - 1);
  std::function<void(int, int)> place = [&](int k, int from) {
    if (k == stages - 1) {
      double worst = 0;
      int begin = 0;
      for (int s = 0; s < stages; ++s) {
        const int end = s + 1 < stages ? cuts[s] : n;
        worst = std::max(worst, std::accumulate(costs.begin() + begin, costs.begin() + end, 0.0));
        begin = end;
      }
      best = std::min(best, worst);
      return;
    }
    for (int c = from; c <= n - (stages - 1 - k); ++c) {
      cuts[k] = c;
      place(k + 1, c + 1);
    }
  };
  place(0, 1);
  return best;
}

TEST(PipelinePartition, BalancedEqualsExhaustiveSearch) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<double> cost(0.1, 10);
  for (int trial = 0; trial < 200; ++trial) {
    const int n = 1 + static_cast<int>(rng() % 9), stages = 1 + static_cast<int>(rng() % n);
    std::vector<double> costs(n);
    for (auto& c : costs) c = cost(rng);
    const auto counts = pipeline::balanced_partition(costs, stages);
    ASSERT_EQ(static_cast<int>(counts.size()), stages);
    const auto bounds = pipeline::stage_bounds(counts);
    ASSERT_EQ(bounds.back(), n);
    double worst = 0;
    for (int s = 0; s < stages; ++s) {
      EXPECT_GE(counts[s], 1);
      worst = std::max(
          worst, std::accumulate(costs.begin() + bounds[s], costs.begin() + bounds[s + 1], 0.0));
    }
    EXPECT_DOUBLE_EQ(worst, best_by_exhaustive_search(costs, stages));
  }
  EXPECT_THROW(pipeline::balanced_partition({1, 2}, 3), ConfigError);
}

TEST(PipelinePartition, TheUsersListIsChecked) {
  EXPECT_EQ(pipeline::checked_partition({2, 3}, 2, 5), (std::vector<int>{2, 3}));
  EXPECT_THROW(pipeline::checked_partition({2, 3}, 3, 5), ConfigError);
  EXPECT_THROW(pipeline::checked_partition({0, 5}, 2, 5), ConfigError);
  EXPECT_THROW(pipeline::checked_partition({2, 2}, 2, 5), ConfigError);
}

std::function<nn::Model()> builder(nn::ModelOptions options) {
  return [options] {
    torch::manual_seed(1);
    auto model = nn::make_model(options);
    model.to(torch::kFloat64);
    return model;
  };
}

struct PipelineBatch {
  torch::Tensor x, y;
};

PipelineBatch random_batch(std::int64_t rows, std::int64_t features) {
  auto gen = torch::make_generator<at::CPUGeneratorImpl>(5);
  return {torch::randn({rows, features}, gen, torch::kFloat64), torch::randint(0, 10, {rows}, gen)};
}

class PipelineGradients : public ::testing::Test {
 protected:
  void SetUp() override { torch::set_num_threads(1); }
};

// Without BatchNorm, micro-batches change nothing: the gradient of the whole batch's mean loss.
TEST_F(PipelineGradients, MlpEqualsTheWholeModelOnTheWholeBatch) {
  const auto [x, y] = random_batch(12, 784);
  for (const auto& c : testing::pipeline_cases())
    testing::expect_pipeline_matches(builder({.name = "mlp", .mlp_layers = {784, 32, 24, 16, 10}}),
                                     x, y, c, 1, testing::kPipelineTolerance);
}

TEST_F(PipelineGradients, LeNet5EqualsTheWholeModelOnTheWholeBatch) {
  const auto [x, y] = random_batch(12, 784);
  for (const auto& c : testing::pipeline_cases())
    testing::expect_pipeline_matches(builder({.name = "lenet5"}), x, y, c, 1, testing::kPipelineTolerance);
}

// BatchNorm normalises each micro-batch by its own statistics (as torchgpipe): the reference
// runs the whole model on the same micro-batches. Its running statistics must move once per
// micro-batch, with or without re-computation.
TEST_F(PipelineGradients, ResNet20EqualsTheWholeModelOnTheSameMicroBatches) {
  const auto [x, y] = random_batch(12, 64);
  for (const auto& c : testing::pipeline_cases())
    testing::expect_pipeline_matches(builder({.name = "resnet20", .image_size = 8}), x, y, c,
                                     c.micro_batches, testing::kPipelineTolerance);
}

TEST(PipelineLayers, AModelThatIsNoSequenceIsRefused) {
  EXPECT_THROW(nn::make_model({.name = "char_lstm", .vocab_size = 8}).layers(), ConfigError);
}

}  // namespace
}  // namespace distml::train
