// The trainer against its single-process reference: N ranks with batch b each must follow the
// trajectory of one rank with batch N*b over the same global order; resuming must not change
// the trajectory at all.
#include "distml/train/trainer.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <mutex>

#include "../data/temp_dir.h"
#include "distml/core/error.h"
#include "trainer_fixture.h"

namespace distml::train {
namespace {

using data::testing::TempDir;
using testing::config_for;
using testing::on_ranks;
using testing::RankOutcome;
using testing::synthetic_images;
using testing::train_once;
using testing::trajectory_difference;
using testing::trajectory_tolerance;

class TrainerEquivalence : public ::testing::TestWithParam<testing::TrajectoryCase> {};

TEST_P(TrainerEquivalence, NRanksEqualOneRankOnTheNTimesBatch) {
  const auto& [model, optim, world] = GetParam();
  const int batch = 4, steps = 20;
  auto data = synthetic_images(batch * world * steps);
  auto reference = on_ranks(1, [&](comm::Communicator& comm) {
    return train_once(config_for(model, optim, batch * world, steps), comm, data);
  });
  auto ranks = on_ranks(world, [&](comm::Communicator& comm) {
    return train_once(config_for(model, optim, batch, steps), comm, data);
  });
  for (int r = 0; r < world; ++r) {
    EXPECT_LE(trajectory_difference(ranks[r], reference[0]), trajectory_tolerance(steps))
        << "rank " << r;
    EXPECT_EQ(ranks[r].result.param_checksum, ranks[0].result.param_checksum) << "rank " << r;
    EXPECT_EQ(ranks[r].result.steps, steps);
  }
}

INSTANTIATE_TEST_SUITE_P(ModelsOptimizersWorlds, TrainerEquivalence,
                         ::testing::ValuesIn(testing::trajectory_cases()),
                         [](const auto& info) { return testing::case_name(info.param); });

TEST(Trainer, BucketsAreReducedWhileBackwardStillRuns) {
  auto data = synthetic_images(64);
  auto ranks = on_ranks(2, [&](comm::Communicator& comm) {
    return train_once(config_for("mlp", "sgd", 8, 3), comm, data);
  });
  EXPECT_GT(ranks[0].result.early_bucket_launches, 0);
  EXPECT_GT(ranks[0].result.comm_time_s, 0);
  EXPECT_GT(ranks[0].result.overlap_fraction, 0);
}

// overlap_fraction counts communication while backward still ran, nothing else: with one
// bucket, which starts when backward ends, it is 0, even on a straggler that sleeps while its
// all-reduce is in flight (which the share of the wait the step did not see would count).
TEST(Trainer, OneBucketOverlapsNothingEvenOnAStraggler) {
  auto data = synthetic_images(64);
  auto config = config_for("lenet5", "sgd", 8, 4);
  config.strategy.first_bucket_mb = config.strategy.bucket_mb = 25;  // one bucket
  config.train.slow_rank = 0;
  config.train.slow_factor = 5;
  auto ranks =
      on_ranks(2, [&](comm::Communicator& comm) { return train_once(config, comm, data); });
  for (const auto& r : ranks) {
    EXPECT_GT(r.result.comm_time_s, 0);
    EXPECT_EQ(r.result.early_bucket_launches, 0);
    EXPECT_EQ(r.result.overlap_fraction, 0);
  }
}

// BatchNorm running statistics are averaged across ranks, not taken from one: after one step
// the first layer's running mean is 0.1 x (its rank's batch mean), whose average over equal
// batches is 0.1 x (the global batch's mean): what one rank computes on the N-times batch.
class ResNetBatchNorm : public ::testing::TestWithParam<int> {};

TEST_P(ResNetBatchNorm, RunningMeansAreAveragedAcrossRanks) {
  const int world = GetParam(), batch = 4;
  auto data = synthetic_images(batch * world);
  auto running_mean = [&](int ranks, int rows) {
    std::vector<torch::Tensor> means(ranks);
    std::vector<std::uint64_t> checksums(ranks);
    on_ranks(ranks, [&](comm::Communicator& comm) {
      Trainer trainer(config_for("resnet20", "sgd", rows, 1), comm, data);
      auto result = trainer.run();
      means[comm.rank()] = trainer.model().named_buffers()["bn1.running_mean"].clone();
      checksums[comm.rank()] = result.param_checksum;
      return RankOutcome{};
    });
    for (int r = 1; r < ranks; ++r) EXPECT_EQ(checksums[r], checksums[0]) << "rank " << r;
    return means[0];
  };
  const auto got = running_mean(world, batch), want = running_mean(1, batch * world);
  // The same means, summed in another order (per rank, then averaged): in float64 each moves
  // by at most n u of its terms' absolute sum (Higham 4.2), n = 12 x 28 x 28 < 1e4 terms and
  // u = 2^-53, so 1e-12 of the terms' size. The terms (a 3x3 convolution of the inputs) have
  // both signs, so their mean can be smaller than their size: x1000 margin gives 1e-9 of the
  // largest mean. Taking rank 0's statistics instead of the average is off by O(1) of it.
  EXPECT_LT((got - want).abs().max().item<double>(), 1e-9 * want.abs().max().item<double>());
  EXPECT_GT(want.abs().max().item<double>(), 0);
}

INSTANTIATE_TEST_SUITE_P(Worlds, ResNetBatchNorm, ::testing::Values(2, 3),
                         [](const auto& info) { return "np" + std::to_string(info.param); });

class TrainerResume : public ::testing::TestWithParam<std::string> {};

TEST_P(TrainerResume, KStepsThenKMoreEqualTwoKStraight) {
  const int k = 6;
  TempDir dir;
  auto data = synthetic_images(200);  // 200 / (8 x 2) = 12 steps an epoch: crosses one
  auto config = config_for("lenet5", GetParam(), 8, 2 * k);
  config.schedule.name = "step";  // the step counter must survive the restart too
  config.schedule.step_size = 4;
  config.schedule.gamma = 0.5;
  auto straight =
      on_ranks(2, [&](comm::Communicator& comm) { return train_once(config, comm, data); });
  auto first = config;
  first.train.max_steps = k;
  first.train.checkpoint_dir = dir.file("ckpt");
  on_ranks(2, [&](comm::Communicator& comm) { return train_once(first, comm, data); });
  auto resumed = on_ranks(2, [&](comm::Communicator& comm) {
    return train_once(config, comm, data, dir.file("ckpt"));
  });
  EXPECT_EQ(resumed[0].result.steps, k);
  EXPECT_EQ(resumed[0].result.global_step, 2 * k);
  for (std::size_t i = 0; i < straight[0].params.size(); ++i)
    EXPECT_TRUE(torch::equal(resumed[0].params[i], straight[0].params[i])) << "parameter " << i;
}

INSTANTIATE_TEST_SUITE_P(Optimizers, TrainerResume, ::testing::Values("sgd", "adam"),
                         [](const auto& info) { return info.param; });

TEST(Trainer, ResumingWithAnotherBatchSizeIsACheckpointError) {
  TempDir dir;
  auto data = synthetic_images(64);
  auto config = config_for("mlp", "sgd", 8, 2);
  config.train.checkpoint_dir = dir.file("ckpt");
  on_ranks(1, [&](comm::Communicator& comm) { return train_once(config, comm, data); });
  config.train.batch_size = 4;
  try {
    on_ranks(1, [&](comm::Communicator& comm) {
      return train_once(config, comm, data, dir.file("ckpt"));
    });
    FAIL() << "resumed with another batch size";
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find("train.batch_size"), std::string::npos) << e.what();
  }
}

// An elastic restart: `before` ranks take 3 steps of two epochs of 200 samples (batch 8 per
// rank) and checkpoint; `after` ranks resume from it with WorldChange::elastic (without it,
// the checkpoint is refused) and finish the epochs. Each rank's outcome.
std::vector<RankOutcome> resumed_on(int before, int after) {
  TempDir dir;
  auto data = synthetic_images(200);
  auto config = config_for("mlp", "sgd", 8, 0);
  config.train.epochs = 2;
  auto first = config;
  first.train.max_steps = 3;
  first.train.checkpoint_dir = dir.file("ckpt");
  on_ranks(before, [&](comm::Communicator& comm) { return train_once(first, comm, data); });
  EXPECT_THROW(on_ranks(after,
                        [&](comm::Communicator& comm) {
                          return train_once(config, comm, data, dir.file("ckpt"));
                        }),
               CheckpointError);
  return on_ranks(after, [&](comm::Communicator& comm) {
    Trainer trainer(config, comm, data);
    const ResumePoint from = trainer.resume(dir.file("ckpt"), WorldChange::elastic);
    EXPECT_EQ(from.saved_world_size, before);
    EXPECT_EQ(from.global_step, 3);
    RankOutcome o;
    o.result = trainer.run();
    return o;
  });
}

// 3 ranks took 72 of epoch 0's samples; the other 128 make 8 steps of 16 on 2 ranks, and epoch
// 1 has 200 / 16 = 12, so 20 steps end the two epochs.
TEST(Trainer, ResumesOnFewerRanksFromTheFirstSampleTheOthersHadNotTaken) {
  const auto resumed = resumed_on(3, 2);
  EXPECT_EQ(resumed[0].result.steps, 20);
  EXPECT_EQ(resumed[0].result.global_step, 23);
}

// The world grows: 2 ranks took 48 of epoch 0's samples; the other 152 make 6 steps of 24 on
// 3 ranks (8 dropped), and epoch 1 has 200 / 24 = 8, so 14 steps end the two epochs. Rank 2,
// new to the run, saved nothing and starts from its own seed.
TEST(Trainer, ResumesOnMoreRanksFromTheFirstSampleTheOthersHadNotTaken) {
  const auto grown = resumed_on(2, 3);
  EXPECT_EQ(grown[0].result.steps, 14);
  EXPECT_EQ(grown[0].result.global_step, 17);
  EXPECT_EQ(grown[2].result.param_checksum, grown[0].result.param_checksum);
}

TEST(Trainer, RanksWithDifferentConfigsFailAtStartOnEveryRank) {
  auto data = synthetic_images(32);
  std::mutex mutex;
  std::vector<std::string> errors(3);
  comm::local::run_ranks(3, {}, [&](comm::Communicator& comm) {
    auto config = config_for("mlp", "sgd", 4, 1);
    if (comm.rank() == 2) config.optim.lr = 0.5;
    try {
      Trainer trainer(config, comm, data);
    } catch (const ConfigError& e) {
      std::lock_guard lock(mutex);
      errors[comm.rank()] = e.what();
    }
  });
  for (int r = 0; r < 3; ++r)
    EXPECT_NE(errors[r].find("rank(s) 2 run a different configuration"), std::string::npos)
        << "rank " << r << ": " << errors[r];
}

TEST(Trainer, AStragglerMustBeARankOfTheRun) {
  auto data = synthetic_images(32);
  auto config = config_for("mlp", "sgd", 4, 2);
  config.train.slow_rank = 1;
  config.train.slow_factor = 2;
  auto ranks =
      on_ranks(2, [&](comm::Communicator& comm) { return train_once(config, comm, data); });
  EXPECT_EQ(ranks[1].result.param_checksum, ranks[0].result.param_checksum);
  config.train.slow_rank = 2;
  try {
    on_ranks(2, [&](comm::Communicator& comm) { return train_once(config, comm, data); });
    FAIL() << "slow_rank 2 accepted at 2 ranks";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("train.slow_rank = 2 is not a rank of this run (0 to 1)"),
              std::string::npos)
        << e.what();
  }
}

TEST(Trainer, CharLstmLearnsARepetitiveText) {
  TaskData t;
  t.kind = TaskKind::language_model;
  t.num_classes = 4;
  const std::size_t window = 17;  // seq_len 16 + 1
  for (auto* d : {&t.train, &t.test}) {
    d->num_samples = 64;
    d->feature_dim = window;
    d->sample_shape = {window};
    for (std::size_t i = 0; i < 64 * window; ++i) d->features.push_back(i % 4);  // "abcdabcd..."
    d->labels.assign(64, 0);
  }
  TrainConfig c = config_for("char_lstm", "adam", 8, 40);
  c.optim.lr = 0.01;
  c.model.hidden_size = 32;
  c.model.embedding_dim = 8;
  auto ranks = on_ranks(2, [&](comm::Communicator& comm) { return train_once(c, comm, t); });
  EXPECT_LT(ranks[0].result.test.perplexity, 1.5);  // uniform guessing would be 4
  EXPECT_GT(ranks[0].result.test.accuracy, 0.9);
}

}  // namespace
}  // namespace distml::train
