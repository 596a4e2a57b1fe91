// The asynchronous pipeline (parallel.schedule = "pipedream"): PipeDream's weight stashing
// gives each micro-batch's backward the weights its forward used, although the stage updates
// in between; SpecTrain's prediction is its formula. Checked on WeightVersions alone, then on
// a 2- and 3-stage mlp whose stages update after every backward (local ranks).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <mutex>

#include "distml/comm/local/local_world.h"
#include "distml/nn/model_registry.h"
#include "distml/train/pipeline/grid.h"
#include "distml/train/pipeline/pipeline_stage.h"
#include "distml/train/pipeline/weight_versions.h"

namespace distml::train {
namespace {

using pipeline::WeightVersions;

std::vector<torch::Tensor> clones(const std::vector<torch::Tensor>& ts) {
  std::vector<torch::Tensor> out;
  for (const auto& t : ts) out.push_back(t.detach().clone());
  return out;
}

void expect_equal(const std::vector<torch::Tensor>& got, const std::vector<torch::Tensor>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) EXPECT_TRUE(torch::equal(got[i], want[i])) << i;
}

TEST(WeightVersions, AStashGivesTheBackwardTheForwardsWeights) {
  std::vector<torch::Tensor> params = {torch::tensor({1.0, 2.0, 3.0}), torch::tensor({-1.0, 0.5})};
  const auto before = clones(params);
  WeightVersions versions(params, {}, true);
  versions.before_forward(0, 1);
  versions.after_forward(0);
  for (auto& p : params) p.add_(0.25);  // micro-batch 1's update comes in between
  versions.updated();
  const auto after = clones(params);
  versions.before_backward(0);
  expect_equal(params, before);
  versions.after_backward(0);
  expect_equal(params, after);
  ASSERT_EQ(versions.uses().size(), 1u);
  const auto& use = versions.uses()[0];
  EXPECT_EQ(use.forward_version, 0);
  EXPECT_EQ(use.backward_version, 1);
  EXPECT_EQ(use.forward_hash, use.backward_hash);
}

TEST(WeightVersions, SpecTrainRunsTheForwardOnItsPrediction) {
  std::vector<torch::Tensor> params = {torch::tensor({1.0, 2.0, 3.0}), torch::tensor({-1.0, 0.5})};
  const std::vector<torch::Tensor> velocity = {torch::tensor({0.5, -0.25, 0.0}),
                                               torch::tensor({1.0, 2.0})};
  const auto current = clones(params);
  // W - ahead x lr x v, by hand: ahead = 3.
  expect_equal(pipeline::predicted_weights(params, velocity, 3),
               {torch::tensor({-0.5, 2.75, 3.0}), torch::tensor({-4.0, -5.5})});
  WeightVersions versions(params, [&] { return velocity; });
  versions.before_forward(0, 3);
  expect_equal(params, {torch::tensor({-0.5, 2.75, 3.0}), torch::tensor({-4.0, -5.5})});
  versions.after_forward(0);
  expect_equal(params, current);
  versions.before_backward(0);  // the backward runs on the current weights
  expect_equal(params, current);
  versions.after_backward(0);
  expect_equal(params, current);
}

// One pipedream step of the mlp over `stages` local ranks, each stage updating by plain SGD
// after every backward; returns every stage's log of weight uses.
std::vector<std::vector<WeightVersions::Use>> pipedream_step(int stages, bool spectrain) {
  constexpr double kLr = 0.1;
  std::vector<nn::Model> models;
  for (int s = 0; s < stages; ++s) {
    torch::manual_seed(11);
    models.push_back(nn::make_model({.name = "mlp", .mlp_layers = {12, 16, 16, 16, 4}}));
  }
  auto gen = torch::make_generator<at::CPUGeneratorImpl>(12);
  const auto x = torch::randn({10, 12}, gen);
  const auto y = torch::arange(10) % 4;
  std::vector<std::vector<WeightVersions::Use>> logs(stages);
  std::mutex mutex;
  comm::local::run_ranks(stages, {}, [&](comm::Communicator& comm) {
    const auto part = pipeline::cut_model(models[comm.rank()], {}, stages, comm.rank());
    auto params = part.own.parameters;
    pipeline::VelocityFn velocity;
    if (spectrain)  // any non-zero velocity: the last gradients
      velocity = [&] {
        std::vector<torch::Tensor> v;
        for (const auto& p : params)
          v.push_back(p.grad().defined() ? kLr * p.grad().clone() : torch::ones_like(p));
        return v;
      };
    pipeline::PipelineStage stage(comm, part.layers, part.own,
                                  {.schedule = "pipedream",
                                   .micro_batches = 5,
                                   .spectrain = velocity,
                                   .log_weight_uses = true});
    stage.step(
        x, x.size(0),
        [&](const torch::Tensor& o, std::int64_t begin, std::int64_t count) {
          return torch::nn::functional::cross_entropy(o, y.narrow(0, begin, count));
        },
        [](bool) {},
        [&] {
          torch::NoGradGuard no_grad;
          for (auto& p : params) p.sub_(kLr * p.grad());
        });
    std::lock_guard lock(mutex);
    logs[comm.rank()] = stage.weight_versions()->uses();
  });
  return logs;
}

TEST(Pipedream, EachBackwardRunsOnTheWeightsItsForwardUsed) {
  for (int stages : {2, 3}) {
    const auto logs = pipedream_step(stages, false);
    for (int s = 0; s < stages; ++s) {
      ASSERT_EQ(logs[s].size(), 5u);
      std::int64_t most_stale = 0;
      for (const auto& use : logs[s]) {
        EXPECT_EQ(use.forward_hash, use.backward_hash)
            << stages << " stages, stage " << s << ", micro-batch " << use.micro;
        most_stale = std::max(most_stale, use.backward_version - use.forward_version);
      }
      // 1F1B's order: stage s updates S - s - 1 times between a forward and its backward.
      EXPECT_EQ(most_stale, stages - s - 1) << stages << " stages, stage " << s;
    }
  }
}

TEST(Pipedream, WithoutTheStashTheWeightsWouldDiffer) {
  // SpecTrain's forward runs on a prediction, its backward on the weights the updates made:
  // where updates came between, the two differ, so the check above can fail.
  const auto logs = pipedream_step(2, true);
  int stale = 0;
  for (const auto& use : logs[0])
    if (use.backward_version > use.forward_version) {
      ++stale;
      EXPECT_NE(use.forward_hash, use.backward_hash) << "micro-batch " << use.micro;
    }
  EXPECT_GT(stale, 0);
}

}  // namespace
}  // namespace distml::train
