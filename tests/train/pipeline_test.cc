// Pipeline parallelism against its references: the schedules' orders, the partitioner against
// exhaustive search, and one step of every schedule at 2, 3 and 4 stages against the whole
// model's gradients on the same batch.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <limits>
#include <numeric>
#include <random>

#include "distml/comm/local/local_world.h"
#include "distml/core/error.h"
#include "distml/nn/model_registry.h"
#include "distml/train/generator_state.h"
#include "distml/train/pipeline/cost_model.h"
#include "distml/train/pipeline/partition.h"
#include "distml/train/pipeline/profile.h"
#include "distml/train/pipeline/schedule.h"
#include "distml/train/pipeline/simulate.h"
#include "distml/train/pipeline/stage_link.h"
#include "distml/train/split_model.h"
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

// A send's tensor is released once the receiver has taken it, not at the end of the step: so a
// stage holds only the activations and gradients its neighbours have not received yet (1F1B's
// S - s micro-batches, not all of them). The sent tensors are counted by their storage's
// owners: the test's own handle and, while the send lasts, the link's.
TEST(PipelineStageLink, FreesEachSendOnceItIsReceived) {
  std::vector<torch::Tensor> sent;
  for (int i = 0; i < 3; ++i) sent.push_back(torch::full({1000}, static_cast<float>(i)));
  comm::local::run_ranks(2, {}, [&](comm::Communicator& comm) {
    pipeline::StageLink link(comm);
    if (comm.rank() == 0) {
      for (int i = 0; i < 3; ++i) link.send(sent[i], 1, i);
      comm.barrier();  // rank 1 has received all three
      (void)link.recv(1, 9);
      for (int i = 0; i < 3; ++i)
        EXPECT_EQ(sent[i].storage().use_count(), 1) << "send " << i << " still held";
      EXPECT_EQ(link.flush(), 3 * 1000 * sizeof(float));
    } else {
      for (int i = 0; i < 3; ++i) EXPECT_TRUE(torch::equal(link.recv(0, i), sent[i]));
      comm.barrier();
      link.send(torch::zeros({1}), 0, 9);
      link.flush();
    }
  });
}

// Calls `visit` with the layer counts of every way to cut n layers into `stages`.
void for_each_partition(int n, int stages,
                        const std::function<void(const std::vector<int>&)>& visit) {
  std::vector<int> counts;
  std::function<void(int)> place = [&](int left) {
    const int stages_left = stages - static_cast<int>(counts.size());
    if (stages_left == 1) {
      counts.push_back(left);
      visit(counts);
      counts.pop_back();
      return;
    }
    for (int c = 1; c <= left - (stages_left - 1); ++c) {
      counts.push_back(c);
      place(left - c);
      counts.pop_back();
    }
  };
  place(n);
}

// The smallest largest-stage cost over every way to cut, by brute force.
double best_by_exhaustive_search(const std::vector<double>& costs, int stages) {
  double best = std::numeric_limits<double>::infinity();
  for_each_partition(static_cast<int>(costs.size()), stages, [&](const std::vector<int>& counts) {
    const auto bounds = pipeline::stage_bounds(counts);
    double worst = 0;
    for (int s = 0; s < stages; ++s)
      worst = std::max(
          worst, std::accumulate(costs.begin() + bounds[s], costs.begin() + bounds[s + 1], 0.0));
    best = std::min(best, worst);
  });
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
    testing::expect_pipeline_matches(builder({.name = "lenet5"}), x, y, c, 1,
                                     testing::kPipelineTolerance);
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

// The cost model's closed forms (cost_model.h, steps 1 to 4), on costs whose sums are exact
// in binary, so that they are compared exactly.
TEST(PipelineCostModel, ClosedForms) {
  using pipeline::LayerCost;
  // Equal stages, free links: the bubble model (m + S - 1) c.
  for (int stages = 1; stages <= 4; ++stages)
    for (int m = 1; m <= 8; ++m) {
      const std::vector<LayerCost> layers(stages, LayerCost{.forward_s = 1, .backward_s = 2});
      EXPECT_EQ(pipeline::predicted_step_s(layers, std::vector<int>(stages, 1), m, {}),
                (m + stages - 1) * 3.0);
    }
  // Unequal stages and a link: 1 + 2 + 2 (0.125 + 512 / 4096) + (4 - 1) max(1, 2, 0.5).
  const std::vector<LayerCost> two = {{.forward_s = 0.5, .backward_s = 0.5, .output_bytes = 512},
                                      {.forward_s = 1, .backward_s = 1}};
  const pipeline::Link link{.latency_s = 0.125, .bytes_per_s = 4096};
  EXPECT_EQ(pipeline::predicted_step_s(two, {1, 1}, 4, link), 1 + 2 + 0.5 + 3 * 2.0);
  // 4 replicas add the slowest stage's ring all-reduce: 2 (4 - 1) (0.125 + 8192 / 4 / 4096).
  auto heavy = two;
  heavy[0].parameter_bytes = 8192;
  heavy[1].parameter_bytes = 4096;
  EXPECT_EQ(pipeline::predicted_step_s(heavy, {1, 1}, 4, link, 4),
            1 + 2 + 0.5 + 3 * 2.0 + 6 * (0.125 + 0.5));
}

// The simulation (simulate.h) against what can be worked out by hand, on costs exact in binary.
TEST(PipelineSimulation, AgreesWithTheClosedForms) {
  using pipeline::LayerCost;
  for (const std::string schedule : {"gpipe", "1f1b"})
    for (int stages = 1; stages <= 4; ++stages)
      for (int m = 1; m <= 8; ++m) {
        // Equal stages on a core each, free links: the bubble model (m + S - 1)(f + b).
        const std::vector<LayerCost> layers(stages, LayerCost{.forward_s = 1, .backward_s = 2});
        EXPECT_EQ(pipeline::simulated_step_s(layers, std::vector<int>(stages, 1), m, schedule, {}),
                  (m + stages - 1) * 3.0)
            << schedule << ", " << stages << " stages, " << m << " micro-batches";
      }
  // Re-computation adds a forward to every backward: (m + S - 1)(f + f + b).
  for (int stages = 1; stages <= 4; ++stages)
    for (int m = 1; m <= 8; ++m) {
      const std::vector<LayerCost> layers(stages, LayerCost{.forward_s = 1, .backward_s = 2});
      EXPECT_EQ(pipeline::simulated_step_s(layers, std::vector<int>(stages, 1), m, "gpipe", {}, {},
                                           1, true),
                (m + stages - 1) * 4.0)
          << stages << " stages, " << m << " micro-batches, re-computed";
    }
  // ddg: each stage is busy every step with a forward, a re-computing backward and an
  // update, f + (f + b) + u, and four copies of its weights, whatever the number of stages,
  // once the pipeline is full.
  for (int stages = 1; stages <= 4; ++stages) {
    const std::vector<LayerCost> layers(
        stages, LayerCost{.forward_s = 1, .backward_s = 2, .update_s = 0.5, .copy_s = 0.25});
    EXPECT_EQ(pipeline::simulated_step_s(layers, std::vector<int>(stages, 1), 1, "ddg", {}),
              4.5 + 4 * 0.25)
        << stages << " stages";
  }
  // One micro-batch through 2 stages and a link of 0.25 s each way: the closed form's
  // 1 + 0.25 + 1 + 1 + 0.25 + 1, then each stage's update (0.5) at once.
  const std::vector<LayerCost> two = {
      {.forward_s = 1, .backward_s = 1, .output_bytes = 1024, .update_s = 0.5},
      {.forward_s = 1, .backward_s = 1, .update_s = 0.5}};
  const pipeline::Link link{.latency_s = 0.125, .bytes_per_s = 8192};
  EXPECT_EQ(pipeline::simulated_step_s(two, {1, 1}, 1, "gpipe", link), 4.5 + 0.5);
  EXPECT_EQ(pipeline::predicted_step_s(two, {1, 1}, 1, link), 4.5);
  // Sharing: one stage on half a core, keeping half its speed when oversubscribed, takes 4x.
  EXPECT_EQ(pipeline::simulated_step_s(two, {2}, 1, "1f1b", link,
                                       {.available = 0.5, .sharing_efficiency = 0.5}),
            4 * 5.0);
}

// The planner's partition against every partition, on random costs, links and micro-batches.
TEST(PipelineCostModel, ThePlannerFindsTheBestOfEveryPartition) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<double> seconds(0.01, 1), bytes(0, 4e6);
  for (int trial = 0; trial < 300; ++trial) {
    const int n = 1 + static_cast<int>(rng() % 9), stages = 1 + static_cast<int>(rng() % n);
    const int m = 1 + static_cast<int>(rng() % 8);
    std::vector<pipeline::LayerCost> layers(n);
    for (auto& l : layers) l = {seconds(rng), 2 * seconds(rng), bytes(rng), bytes(rng)};
    const pipeline::Link link{.latency_s = seconds(rng) / 100,
                              .bytes_per_s = 1e7 + 1e8 * seconds(rng)};
    double best = std::numeric_limits<double>::infinity();
    for_each_partition(n, stages, [&](const std::vector<int>& counts) {
      best = std::min(best, pipeline::predicted_step_s(layers, counts, m, link));
    });
    const auto plan = pipeline::best_partition(layers, stages, m, link);
    EXPECT_EQ(plan.step_s, pipeline::predicted_step_s(layers, plan.counts, m, link));
    // The same sums in another order: equal up to a few ulps.
    EXPECT_NEAR(plan.step_s, best, 1e-12 * best) << n << " layers, " << stages << " stages";
  }
  EXPECT_THROW(pipeline::best_partition({{}, {}}, 3, 1, {}), ConfigError);
}

// Profiling measures every layer and leaves the model, its gradients, its BatchNorm
// statistics and the random generator as they were (profile.h, step 4).
TEST(PipelineProfile, MeasuresEveryLayerAndLeavesTheModelAsItWas) {
  torch::manual_seed(8);
  auto model =
      nn::make_model({.name = "resnet20", .in_channels = 3, .image_size = 16, .num_classes = 10});
  const auto tensors = model.tensors();
  std::vector<torch::Tensor> buffers;
  for (const auto& b : tensors.buffers) buffers.push_back(b.clone());
  const auto input = torch::randn({4, 3, 16, 16});
  const auto labels = torch::arange(4);
  const auto rng = train::generator_state();
  const auto costs = pipeline::profile_layers(
      model.layers(), tensors, input,
      [&](const torch::Tensor& out) { return torch::nn::functional::cross_entropy(out, labels); },
      2);
  ASSERT_EQ(costs.size(), 11u);  // the stem, nine blocks, the head
  double parameter_bytes = 0;
  for (const auto& c : costs) {
    EXPECT_GT(c.forward_s, 0);
    EXPECT_GT(c.backward_s, 0);
    EXPECT_GT(c.update_s, 0);  // every resnet20 layer has parameters
    EXPECT_GT(c.copy_s, 0);
    parameter_bytes += c.parameter_bytes;
  }
  EXPECT_EQ(costs.back().output_bytes, 4 * 10 * 4);  // 4 rows of 10 float32 logits
  double expected_bytes = 0;
  for (const auto& p : tensors.parameters) expected_bytes += 4.0 * p.numel();
  EXPECT_EQ(parameter_bytes, expected_bytes);
  for (const auto& p : tensors.parameters) EXPECT_FALSE(p.grad().defined());
  for (std::size_t i = 0; i < buffers.size(); ++i)
    EXPECT_TRUE(torch::equal(tensors.buffers[i], buffers[i])) << tensors.buffer_names[i];
  EXPECT_EQ(train::generator_state(), rng);
}

TEST(PipelineLayers, AModelThatIsNoSequenceIsRefused) {
  EXPECT_THROW(nn::make_model({.name = "char_lstm", .vocab_size = 8}).layers(), ConfigError);
}

// A rank keeps only its stage's tensors; rank 0 gathers them back bit for bit, with the
// BatchNorm buffers (resnet20 over 3 stages, each stage's tensors set to its own values).
TEST(PipelineStages, HoldOnlyTheirOwnTensorsUntilRankZeroGathersThem) {
  constexpr int kStages = 3;
  torch::manual_seed(3);
  const auto want = nn::make_model({.name = "resnet20"});
  std::vector<nn::Model> models;
  for (int s = 0; s < kStages; ++s) models.push_back(nn::make_model({.name = "resnet20"}));
  comm::local::run_ranks(kStages, {}, [&](comm::Communicator& world) {
    const int s = world.rank();
    auto grid = pipeline::make_grid(world, kStages);
    auto part = pipeline::cut_model(models[s], {}, kStages, s);
    const auto whole = pipeline::cut_model(want, {}, kStages, s).own;
    {
      torch::NoGradGuard no_grad;  // this stage's tensors as the reference has them
      for (std::size_t i = 0; i < part.own.parameters.size(); ++i)
        part.own.parameters[i].copy_(whole.parameters[i]);
      for (std::size_t i = 0; i < part.own.buffers.size(); ++i)
        part.own.buffers[i].copy_(whole.buffers[i]);
    }
    pipeline::release_other_stages(part);
    std::int64_t held = 0;
    for (const auto& p : models[s].parameters()) held += p.numel();
    EXPECT_EQ(held, parameter_count(part.own)) << "stage " << s;
    pipeline::gather_on_rank0(part, grid);
    if (s != 0) return;
    const auto got = models[0].tensors(), all = want.tensors();
    ASSERT_EQ(got.parameters.size(), all.parameters.size());
    for (std::size_t i = 0; i < all.parameters.size(); ++i)
      EXPECT_TRUE(torch::equal(got.parameters[i], all.parameters[i])) << got.parameter_names[i];
    for (std::size_t i = 0; i < all.buffers.size(); ++i)
      EXPECT_TRUE(torch::equal(got.buffers[i], all.buffers[i])) << got.buffer_names[i];
  });
}

}  // namespace
}  // namespace distml::train
