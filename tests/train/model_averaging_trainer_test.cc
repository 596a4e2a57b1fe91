// Model averaging through the trainer: local SGD with period 1 and post-local SGD's warm-up
// against synchronous SGD, evaluation and resume for every averaging strategy, and the resume
// of asynchronous EASGD. (model_averaging_test.cc checks the strategies' primitives.)
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "../data/temp_dir.h"
#include "trainer_fixture.h"

namespace distml::train {
namespace {

using StrategyTest = testing::WorldSizeTest;
using testing::config_for;
using testing::on_ranks;
using testing::synthetic_images;
using testing::train_once;
using testing::trajectory_difference;
using testing::trajectory_tolerance;
using testing::world_name;

TrainConfig small_mlp(const std::string& strategy, int batch, int steps) {
  auto c = config_for("mlp", "sgd", batch, steps);
  c.model.mlp_layers = {784, 32, 10};
  c.strategy.name = strategy;
  return c;
}

using LocalSgdTrainerTest = StrategyTest;

TEST_P(LocalSgdTrainerTest, PeriodOneEqualsSynchronousSgd) {
  const int world = GetParam(), batch = 4, steps = 20;
  auto data = synthetic_images(batch * world * steps);
  auto one_rank = on_ranks(1, [&](comm::Communicator& comm) {
    return train_once(small_mlp("allreduce", batch * world, steps), comm, data);
  });
  auto allreduce = on_ranks(world, [&](comm::Communicator& comm) {
    return train_once(small_mlp("allreduce", batch, steps), comm, data);
  });
  auto config = small_mlp("local_sgd", batch, steps);
  config.strategy.period = 1;
  auto local =
      on_ranks(world, [&](comm::Communicator& comm) { return train_once(config, comm, data); });
  Worst worst;
  for (int r = 0; r < world; ++r) {
    worst.add(trajectory_difference(local[r], one_rank[0]));
    worst.add(trajectory_difference(local[r], allreduce[r]));
    EXPECT_LE(trajectory_difference(local[r], one_rank[0]), trajectory_tolerance(steps))
        << "rank " << r;
    EXPECT_LE(trajectory_difference(local[r], allreduce[r]), trajectory_tolerance(steps))
        << "rank " << r;
    EXPECT_EQ(local[r].result.param_checksum, local[0].result.param_checksum) << "rank " << r;
  }
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, LocalSgdTrainerTest, ::testing::Values(2, 3, 4), world_name);

using PostLocalSgdTrainerTest = StrategyTest;

TEST_P(PostLocalSgdTrainerTest, WarmupOverTheWholeRunIsAllreduceAShortOneIsNot) {
  const int world = GetParam(), batch = 4, steps = 20;
  auto data = synthetic_images(batch * world * steps);
  auto allreduce = on_ranks(world, [&](comm::Communicator& comm) {
    return train_once(small_mlp("allreduce", batch, steps), comm, data);
  });
  auto run = [&](int warmup) {
    auto config = small_mlp("post_local_sgd", batch, steps);
    config.strategy.warmup_steps = warmup;
    config.strategy.period = 4;
    return on_ranks(world,
                    [&](comm::Communicator& comm) { return train_once(config, comm, data); });
  };
  auto whole = run(steps), short_warmup = run(5);
  Worst worst;
  for (int r = 0; r < world; ++r) {
    worst.add(trajectory_difference(whole[r], allreduce[r]));
    EXPECT_LE(trajectory_difference(whole[r], allreduce[r]), trajectory_tolerance(steps))
        << "rank " << r;
    EXPECT_EQ(whole[r].result.bytes_sent, allreduce[r].result.bytes_sent);
    const double apart = trajectory_difference(short_warmup[r], allreduce[r]);
    std::cout << "[ measured ] warm-up 5 of 20 differs from allreduce by " << apart << "\n";
    // 15 local steps between averages move the replicas apart by a share of the whole run's
    // travel: orders of magnitude above the rounding bound.
    EXPECT_GT(apart, 1000 * trajectory_tolerance(steps)) << "rank " << r;
    EXPECT_EQ(short_warmup[r].result.param_checksum, short_warmup[0].result.param_checksum);
    EXPECT_GT(short_warmup[r].result.consensus_distance, 0);
  }
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, PostLocalSgdTrainerTest, ::testing::Values(2, 3, 4),
                         world_name);

// Evaluations and checkpoints reconcile mid-run; the run ends with one model on every rank, and
// a resume from a checkpoint continues as the run that wrote it.
class ModelAveragingTrainerTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override { torch::set_num_threads(1); }
};

TEST_P(ModelAveragingTrainerTest, ResumeContinuesExactlyAndEndsWithOneModel) {
  const int world = 3, batch = 4, k = 6;
  data::testing::TempDir dir;
  auto data = synthetic_images(200);
  auto config = small_mlp(GetParam(), batch, 2 * k);
  config.strategy.period = 4;
  config.strategy.alpha = 0.2;
  config.strategy.warmup_steps = 2;
  config.train.eval_every = 5;
  config.train.checkpoint_every = k;  // the straight run reconciles where the first half ends
  config.train.checkpoint_dir = dir.file("straight");
  auto straight =
      on_ranks(world, [&](comm::Communicator& comm) { return train_once(config, comm, data); });
  auto first = config;
  first.train.max_steps = k;
  first.train.checkpoint_dir = dir.file("resumed");
  on_ranks(world, [&](comm::Communicator& comm) { return train_once(first, comm, data); });
  auto second = config;
  second.train.checkpoint_dir = dir.file("resumed");
  auto resumed = on_ranks(world, [&](comm::Communicator& comm) {
    return train_once(second, comm, data, dir.file("resumed"));
  });
  for (int r = 0; r < world; ++r) {
    EXPECT_EQ(straight[r].result.param_checksum, straight[0].result.param_checksum);
    EXPECT_GT(straight[r].result.consensus_distance, 0) << "rank " << r;
    EXPECT_GT(straight[r].result.bytes_sent, 0) << "rank " << r;
  }
  for (std::size_t i = 0; i < straight[0].params.size(); ++i)
    EXPECT_TRUE(torch::equal(resumed[0].params[i], straight[0].params[i])) << "parameter " << i;
}

INSTANTIATE_TEST_SUITE_P(Strategies, ModelAveragingTrainerTest,
                         ::testing::Values("local_sgd", "post_local_sgd", "easgd", "gossip"),
                         [](const auto& info) { return info.param; });

// An evaluation looks at the consensus model but gives every replica its own parameters,
// optimizer state and BatchNorm statistics back: evaluating every 3 steps ends where never
// evaluating does, bit for bit (with average_optimizer_state = false, which a reconcile
// would otherwise override).
TEST_P(ModelAveragingTrainerTest, EvaluatingDoesNotChangeTheTrajectory) {
  const int world = 3, batch = 4, steps = 12;  // 200 / 12 = 16 steps an epoch: no epoch end
  auto data = synthetic_images(200);
  auto quiet = small_mlp(GetParam(), batch, steps);
  quiet.strategy.period = 4;
  quiet.strategy.alpha = 0.2;
  quiet.strategy.warmup_steps = 2;
  auto evaluating = quiet;
  evaluating.train.eval_every = 3;
  auto a = on_ranks(world, [&](comm::Communicator& comm) { return train_once(quiet, comm, data); });
  auto b =
      on_ranks(world, [&](comm::Communicator& comm) { return train_once(evaluating, comm, data); });
  for (std::size_t i = 0; i < a[0].params.size(); ++i)
    EXPECT_TRUE(torch::equal(a[0].params[i], b[0].params[i])) << "parameter " << i;
}

// The same with compressed averages (top-k with error feedback, PowerSGD): the evaluation's
// reconcile must leave the anchor, the residuals and PowerSGD's Q as they were.
TEST(CompressedModelAveraging, EvaluatingDoesNotChangeTheTrajectory) {
  torch::set_num_threads(1);
  const int world = 3, batch = 4, steps = 12;
  auto data = synthetic_images(200);
  for (const char* strategy : {"local_sgd", "post_local_sgd"})
    for (const char* compressor : {"topk", "powersgd"}) {
      auto quiet = small_mlp(strategy, batch, steps);
      quiet.train.dtype = "float32";  // what the compressors take
      quiet.strategy.period = 2;
      quiet.strategy.warmup_steps = 2;
      quiet.compress.name = compressor;
      quiet.compress.ratio = 0.1;
      auto evaluating = quiet;
      evaluating.train.eval_every = 3;
      auto a =
          on_ranks(world, [&](comm::Communicator& comm) { return train_once(quiet, comm, data); });
      auto b = on_ranks(
          world, [&](comm::Communicator& comm) { return train_once(evaluating, comm, data); });
      for (std::size_t i = 0; i < a[0].params.size(); ++i)
        EXPECT_TRUE(torch::equal(a[0].params[i], b[0].params[i]))
            << strategy << " " << compressor << " parameter " << i;
    }
}

// Asynchronous EASGD's centre rank reads no checkpoint: after a resume it must still hold the
// saved centre (the model the checkpoint holds), not the initial model, and no rank may wait
// in a collective the others never join.
TEST(AsyncEasgdTrainer, AResumedCentreRankHoldsTheCheckpointsModel) {
  const int world = 3, batch = 4, k = 6;
  data::testing::TempDir dir;
  auto data = synthetic_images(200);
  auto config = small_mlp("easgd", batch, k);
  config.strategy.asynchronous = true;
  config.strategy.alpha = 0.2;
  config.strategy.period = 2;
  config.train.timeout_s = 20;  // a hang fails the test in 20 s
  config.train.checkpoint_dir = dir.file("ckpt");
  auto first =
      on_ranks(world, [&](comm::Communicator& comm) { return train_once(config, comm, data); });
  // The same step budget: the resumed run takes no step, so its final reconcile installs the
  // centre the centre rank holds, which must be the saved one.
  auto resumed = on_ranks(world, [&](comm::Communicator& comm) {
    return train_once(config, comm, data, dir.file("ckpt"));
  });
  for (int r = 0; r < world - 1; ++r)
    for (std::size_t i = 0; i < first[0].params.size(); ++i)
      EXPECT_TRUE(torch::equal(resumed[r].params[i], first[0].params[i]))
          << "worker " << r << " parameter " << i;
}

}  // namespace
}  // namespace distml::train
