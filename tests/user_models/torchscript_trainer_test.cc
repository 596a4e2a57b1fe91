// The user's TorchScript CNN with BatchNorm (made by make_models.py, in the folder that
// DISTML_USER_MODELS names) trains under the trainer as the built-in models do.
#include <gtest/gtest.h>

#include <cstdlib>

#include "../train/pipeline_fixture.h"
#include "../train/trainer_fixture.h"

namespace distml::train::testing {
namespace {

std::string user_model(const std::string& file) {
  const char* dir = std::getenv("DISTML_USER_MODELS");
  return std::string(dir ? dir : ".") + "/" + file;
}

TrainConfig cnn_config(int batch, int steps) {
  auto c = config_for("torchscript", "sgd", batch, steps);
  c.model.path = user_model("cnn_bn.pt");
  return c;
}

class TorchScriptTrainer : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override { torch::set_num_threads(1); }
};

// BatchNorm normalises each rank's batch with that batch's statistics, so N ranks of batch B
// compute what one rank computes on N micro-batches of B (accumulate = N), not on one batch of
// N x B: that is the single-process reference. The tolerance is the trainer tests' bound
// (trainer_fixture.h): this CNN's widest sum is BatchNorm's over batch x 12 x 12 = 1152 terms,
// inside the 16 x 1024 that bound allows.
TEST_P(TorchScriptTrainer, NRanksEqualOneRankOnNMicroBatches) {
  const int world = GetParam(), batch = 8, steps = 10;
  const auto data = synthetic_images(240);
  auto reference = cnn_config(batch, steps);
  reference.train.accumulate = world;
  const auto want =
      on_ranks(1, [&](comm::Communicator& comm) { return train_once(reference, comm, data); });
  const auto got = on_ranks(world, [&](comm::Communicator& comm) {
    return train_once(cnn_config(batch, steps), comm, data);
  });
  for (int r = 0; r < world; ++r) {
    EXPECT_LT(trajectory_difference(got[r], want[0]), trajectory_tolerance(steps)) << "rank " << r;
    // Parameters and BatchNorm buffers are bit-identical on every rank at the end.
    EXPECT_EQ(got[r].result.param_checksum, got[0].result.param_checksum);
  }
}

INSTANTIATE_TEST_SUITE_P(Worlds, TorchScriptTrainer, ::testing::Values(1, 2, 3),
                         [](const auto& info) { return "np" + std::to_string(info.param); });

// The running statistics are averaged across ranks before evaluation: every rank ends with
// the mean of what each computed, which differs from rank 0's own.
TEST(TorchScriptBatchNorm, RunningStatisticsAreAveragedAcrossRanks) {
  const auto data = synthetic_images(240);
  const auto config = cnn_config(8, 4);
  std::vector<torch::Tensor> means(3);
  on_ranks(3, [&](comm::Communicator& comm) {
    Trainer trainer(config, comm, data);
    trainer.run();
    means[comm.rank()] = trainer.model().named_buffers()["bn.running_mean"].clone();
    return RankOutcome{};
  });
  EXPECT_TRUE(torch::equal(means[0], means[1]));
  EXPECT_TRUE(torch::equal(means[0], means[2]));
  EXPECT_GT(means[0].abs().sum().item<double>(), 0) << "training moved the running mean";
}

TEST(TorchScriptModel, ParameterNamesComeFromTheScriptedModule) {
  const auto model = nn::make_model({.name = "torchscript", .path = user_model("cnn_bn.pt")});
  const auto names = model.tensors();
  EXPECT_EQ(names.parameter_names, (std::vector<std::string>{"conv.weight", "bn.weight", "bn.bias",
                                                             "fc.weight", "fc.bias"}));
  EXPECT_EQ(names.buffer_names, (std::vector<std::string>{"bn.running_mean", "bn.running_var",
                                                          "bn.num_batches_tracked"}));
}

TEST(TorchScriptModel, MissingOrBadFileIsADataErrorNamingIt) {
  EXPECT_THROW(nn::make_model({.name = "torchscript", .path = "/nonexistent/net.pt"}), DataError);
  EXPECT_THROW(nn::make_model({.name = "torchscript"}), ConfigError);
  try {
    nn::make_model({.name = "torchscript", .path = user_model("images.npz")});
    FAIL() << "an .npz file loaded as TorchScript";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("images.npz"), std::string::npos) << e.what();
  }
}

std::function<nn::Model()> script_builder(const std::string& file) {
  return [file] {
    auto model = nn::make_model({.name = "torchscript", .path = user_model(file)});
    model.to(torch::kFloat64);
    return model;
  };
}

std::pair<torch::Tensor, torch::Tensor> images(std::int64_t rows) {
  auto gen = torch::make_generator<at::CPUGeneratorImpl>(6);
  return {torch::rand({rows, 28, 28}, gen, torch::kFloat64), torch::randint(0, 10, {rows}, gen)};
}

// A scripted nn.Sequential (Flatten, Linear, BatchNorm1d, ReLU, ...) cut at its top level: the
// same check as the built-in models' (tests/train/pipeline_test.cc), on the same micro-batches
// because of the BatchNorm.
TEST(TorchScriptPipeline, SequentialEqualsTheWholeModelOnTheSameMicroBatches) {
  torch::set_num_threads(1);
  const auto [x, y] = images(12);
  for (const auto& c : pipeline_cases())
    expect_pipeline_matches(script_builder("seq_bn.pt"), x, y, c, c.micro_batches,
                            kPipelineTolerance);
}

// Re-computation replays the generator, so dropout draws the same masks in the second forward
// as in the first: the gradients equal those without re-computation bit for bit (one stage,
// so one thread draws).
TEST(TorchScriptPipeline, RecomputationDrawsTheSameDropoutMasks) {
  torch::set_num_threads(1);
  const auto [x, y] = images(12);
  std::vector<Named> grads;
  for (bool recompute : {false, true}) {
    std::vector<nn::Model> models = {script_builder("seq_dropout.pt")()};
    torch::manual_seed(9);
    grads.push_back(pipeline_step(models, x, y, {"gpipe", 1, 4, recompute})[0].grads);
  }
  ASSERT_FALSE(grads[0].empty());
  for (const auto& [name, g] : grads[0]) EXPECT_TRUE(torch::equal(g, grads[1].at(name))) << name;
}

// With two stages both drawing dropout masks at once (threads of one process), each draws
// from a stream of its own: re-computation replays each stage's masks, so the gradients equal
// those without it bit for bit, on every step of several.
TEST(TorchScriptPipeline, StagesThatAreThreadsDrawTheirOwnMasks) {
  torch::set_num_threads(1);
  const auto [x, y] = images(48);
  for (int trial = 0; trial < 10; ++trial) {
    std::vector<std::vector<StepResult>> runs;
    for (bool recompute : {false, true}) {
      std::vector<nn::Model> models;
      for (int s = 0; s < 2; ++s) models.push_back(script_builder("seq_dropout_blocks.pt")());
      torch::manual_seed(9 + trial);
      runs.push_back(pipeline_step(models, x, y, {"gpipe", 2, 8, recompute}));
    }
    for (int s = 0; s < 2; ++s) {
      ASSERT_FALSE(runs[0][s].grads.empty());
      for (const auto& [name, g] : runs[0][s].grads)
        ASSERT_TRUE(torch::equal(g, runs[1][s].grads.at(name)))
            << "trial " << trial << " stage " << s << " " << name;
    }
  }
}

// A module whose forward is more than its children in order would train another network when
// cut: refused before the first step, naming why (exit code 2 from the command line).
TEST(TorchScriptPipeline, AForwardThatIsNotItsChildrenIsRefused) {
  torch::set_num_threads(1);
  const auto data = synthetic_images(64);
  for (const auto& [file, why] :
       {std::pair{"relu_between.pt", "its children in order give another result than forward"},
        {"scale_on_top.pt", "'scale' belongs to no child module"}}) {
    auto c = config_for("torchscript", "sgd", 8, 2);
    c.model.path = user_model(file);
    c.parallel.pipeline_stages = 2;
    on_ranks(2, [&](comm::Communicator& comm) {
      try {
        Trainer trainer(c, comm, data);
        ADD_FAILURE() << file << " was cut into stages";
      } catch (const ConfigError& e) {
        EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("parallel.pipeline_stages"), std::string::npos)
            << e.what();
      }
      return RankOutcome{};
    });
  }
  // The same module as an nn.Sequential is cut.
  auto c = config_for("torchscript", "sgd", 8, 2);
  c.model.path = user_model("seq_dropout.pt");
  c.parallel.pipeline_stages = 2;
  on_ranks(2, [&](comm::Communicator& comm) { return train_once(c, comm, data); });
}

// ZeRO stage 3 runs a TorchScript nn.Sequential child by child, gathering each child's
// parameters, and ends bit for bit where stage 2 ends: both reduce-scatter the same gradients
// element by element over the same ranks and step the same optimizer on the same shard
// elements; only the bucket boundaries differ. (Against the all-reduce strategy the bound of
// trainer_fixture.h does not apply to this model: its Linear's bias before BatchNorm gets a zero
// gradient, moved by rounding alone, which Adam scales to full steps.) A module whose forward
// is more than its children is refused at start, naming strategy.stage.
TEST(TorchScriptZero3, SequentialModulesEndWhereStageTwoEnds) {
  torch::set_num_threads(1);
  const auto data = synthetic_images(240);
  for (int world : {2, 3}) {
    auto c = config_for("torchscript", "adam", 8, 6);
    c.model.path = user_model("seq_bn.pt");
    c.strategy.name = "zero";
    c.strategy.stage = 2;
    const auto stage2 =
        on_ranks(world, [&](comm::Communicator& comm) { return train_once(c, comm, data); });
    c.strategy.stage = 3;
    const auto stage3 =
        on_ranks(world, [&](comm::Communicator& comm) { return train_once(c, comm, data); });
    for (int r = 0; r < world; ++r)
      EXPECT_EQ(stage3[r].result.param_checksum, stage2[r].result.param_checksum)
          << "np " << world << " rank " << r;
  }
  auto c = config_for("torchscript", "sgd", 8, 2);
  c.model.path = user_model("relu_between.pt");
  c.strategy.name = "zero";
  c.strategy.stage = 3;
  on_ranks(2, [&](comm::Communicator& comm) {
    try {
      Trainer trainer(c, comm, data);
      ADD_FAILURE() << "relu_between.pt was run layer by layer";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("strategy.stage"), std::string::npos) << e.what();
    }
    return RankOutcome{};
  });
}

}  // namespace
}  // namespace distml::train::testing
