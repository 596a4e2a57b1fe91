// ZeRO stages 1, 2 and 3 against their references: N sharded ranks must follow the all-reduce
// strategy and one rank on the N-times batch, while each rank holds about 1/N of the
// optimizer state.
#include "distml/train/strategies/zero_strategy.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdio>
#include <mutex>

#include "../data/temp_dir.h"
#include "distml/core/error.h"
#include "distml/train/model_setup.h"
#include "trainer_fixture.h"

namespace distml::train {
namespace {

using testing::config_for;
using testing::on_ranks;
using testing::RankOutcome;
using testing::synthetic_images;
using testing::train_once;
using testing::trajectory_difference;
using testing::trajectory_tolerance;

TrainConfig with_zero(TrainConfig c, int stage, bool prefetch = true) {
  c.strategy.name = "zero";
  c.strategy.stage = stage;
  c.strategy.prefetch = prefetch;
  return c;
}

struct WorstDifferences {
  double vs_one_rank = 0, vs_allreduce = 0;
};

// Checks every rank of `zero` against the one-rank reference and the all-reduce run over
// `steps` steps, within trajectory_tolerance, and that all ranks agree bit for bit; returns the
// worst differences seen.
WorstDifferences expect_equivalent(const std::vector<RankOutcome>& zero,
                                   const RankOutcome& reference,
                                   const std::vector<RankOutcome>& allreduce, int steps) {
  const double tolerance = trajectory_tolerance(steps);
  WorstDifferences worst;
  for (std::size_t r = 0; r < zero.size(); ++r) {
    const double vs_reference = trajectory_difference(zero[r], reference);
    const double vs_allreduce = trajectory_difference(zero[r], allreduce[r]);
    EXPECT_LE(vs_reference, tolerance) << "rank " << r << " against one rank";
    EXPECT_LE(vs_allreduce, tolerance) << "rank " << r << " against allreduce";
    EXPECT_EQ(zero[r].result.param_checksum, zero[0].result.param_checksum) << "rank " << r;
    EXPECT_EQ(zero[r].result.steps, reference.result.steps) << "rank " << r;
    worst.vs_one_rank = std::max(worst.vs_one_rank, vs_reference);
    worst.vs_allreduce = std::max(worst.vs_allreduce, vs_allreduce);
  }
  return worst;
}

class ZeroEquivalence : public ::testing::TestWithParam<testing::TrajectoryCase> {};

TEST_P(ZeroEquivalence, EveryStageEqualsAllreduceAndOneRankOnTheNTimesBatch) {
  const auto& [model, optim, world] = GetParam();
  const int batch = 4, steps = 20;
  auto data = synthetic_images(batch * world * steps);
  const auto config = config_for(model, optim, batch, steps);
  auto reference = on_ranks(1, [&](comm::Communicator& comm) {
    return train_once(config_for(model, optim, batch * world, steps), comm, data);
  });
  auto allreduce =
      on_ranks(world, [&](comm::Communicator& comm) { return train_once(config, comm, data); });
  for (int stage : {1, 2, 3})
    for (bool prefetch : {true, false}) {
      if (!prefetch && stage < 3) continue;  // only stage 3 gathers layer by layer
      auto zero = on_ranks(world, [&](comm::Communicator& comm) {
        return train_once(with_zero(config, stage, prefetch), comm, data);
      });
      const auto worst = expect_equivalent(zero, reference[0], allreduce, steps);
      std::printf("zero stage %d%s, %s %s np %d: %.3g vs one rank, %.3g vs allreduce\n", stage,
                  prefetch ? "" : " without prefetch", model.c_str(), optim.c_str(), world,
                  worst.vs_one_rank, worst.vs_allreduce);
    }
}

// One rank: every block is the whole bucket, and the gathers copy it to itself.
TEST(ZeroStrategy, Stage3OnOneRankEqualsTheReference) {
  const int batch = 8, steps = 20;
  auto data = synthetic_images(batch * steps);
  for (const char* model : {"mlp", "lenet5"}) {
    const auto config = config_for(model, "adam", batch, steps);
    auto reference =
        on_ranks(1, [&](comm::Communicator& comm) { return train_once(config, comm, data); });
    for (bool prefetch : {true, false}) {
      auto zero = on_ranks(1, [&](comm::Communicator& comm) {
        return train_once(with_zero(config, 3, prefetch), comm, data);
      });
      expect_equivalent(zero, reference[0], reference, steps);
    }
  }
}

// No rank ever holds the whole model: each layer is cut as soon as it is built, so after the
// trainer is made every parameter is empty until a layer is gathered (the RSS this saves is
// measured in docs/benchmarks.md). The training itself is checked against the reference above,
// from the same sharded start.
TEST(ZeroStrategy, Stage3BuildsTheModelSharded) {
  const int world = 3, batch = 4, steps = 2;
  auto data = synthetic_images(world * batch * steps);
  for (const char* model : {"mlp", "lenet5"}) {
    const auto config = with_zero(config_for(model, "sgd", batch, steps), 3);
    comm::local::run_ranks(world, {}, [&](comm::Communicator& comm) {
      Trainer trainer(config, comm, data);
      for (const auto& p : trainer.model().named_parameters())
        EXPECT_EQ(p.value().storage().nbytes(), 0u)
            << model << " rank " << comm.rank() << " " << p.key();
    });
  }
}

// Without a whole model to broadcast, the ranks must have built the same one. The trainer
// refuses ranks with other seeds before it builds anything (their configurations differ);
// this is the check behind it, for weights that differ all the same (another LibTorch's
// generator): one rank that drew others is named on every rank, not trained from.
TEST(ZeroStrategy, Stage3RefusesRanksThatBuiltOtherWeights) {
  const auto data = synthetic_images(8);
  comm::local::run_ranks(3, {}, [&](comm::Communicator& comm) {
    auto config = config_for("mlp", "sgd", 4, 2);
    config.train.seed += static_cast<std::uint64_t>(comm.rank() == 2);
    ZeroStrategy strategy(comm, {.stage = 3});
    auto model = build_model(config, data, strategy.on_layer_built());
    strategy.attach(model);
    try {
      strategy.setup(model.tensors());
      ADD_FAILURE() << "rank " << comm.rank() << ": trained from another rank's weights";
    } catch (const CommError& e) {
      EXPECT_NE(std::string(e.what()).find("rank 2 built other initial weights"), std::string::npos)
          << e.what();
    }
  });
}

INSTANTIATE_TEST_SUITE_P(ModelsOptimizersWorlds, ZeroEquivalence,
                         ::testing::ValuesIn(testing::trajectory_cases()),
                         [](const auto& info) { return testing::case_name(info.param); });

TEST(ZeroStrategy, GradientAccumulationEqualsTheReference) {
  const int batch = 4, steps = 20, world = 3, accumulate = 2;
  auto data = synthetic_images(batch * accumulate * world * steps);
  for (const std::string optim : {"adam", "sgd"}) {
    auto config = config_for("mlp", optim, batch, steps);
    config.train.accumulate = accumulate;
    auto one_rank = config;
    one_rank.train.batch_size = batch * world;
    auto reference =
        on_ranks(1, [&](comm::Communicator& c) { return train_once(one_rank, c, data); });
    auto allreduce =
        on_ranks(world, [&](comm::Communicator& c) { return train_once(config, c, data); });
    for (int stage : {1, 2, 3}) {
      auto zero = on_ranks(world, [&](comm::Communicator& comm) {
        return train_once(with_zero(config, stage), comm, data);
      });
      const auto worst = expect_equivalent(zero, reference[0], allreduce, steps);
      std::printf(
          "zero stage %d, mlp %s np %d accumulate %d: %.3g vs one rank, %.3g vs allreduce\n", stage,
          optim.c_str(), world, accumulate, worst.vs_one_rank, worst.vs_allreduce);
    }
  }
}

TEST(ZeroStrategy, EachOfFourRanksHoldsAQuarterOfTheAdamState) {
  const int world = 4, batch = 4, steps = 3;
  auto data = synthetic_images(batch * world * steps);
  const auto config = config_for("mlp", "adam", batch, steps);
  auto allreduce =
      on_ranks(world, [&](comm::Communicator& comm) { return train_once(config, comm, data); });
  std::size_t elements = 0;
  for (auto& p : allreduce[0].params) elements += p.numel();
  const auto element_size = static_cast<std::size_t>(allreduce[0].params[0].element_size());
  const std::size_t full = 2 * elements * element_size;  // exp_avg and exp_avg_sq
  EXPECT_EQ(allreduce[0].result.optimizer_state_bytes, full);
  for (int stage : {1, 2, 3}) {
    auto zero = on_ranks(world, [&](comm::Communicator& comm) {
      return train_once(with_zero(config, stage), comm, data);
    });
    std::size_t largest = 0, total = 0;
    for (auto& r : zero) {
      largest = std::max(largest, r.result.optimizer_state_bytes);
      total += r.result.optimizer_state_bytes;
    }
    const double ratio = static_cast<double>(largest) / full;
    std::printf("zero stage %d, mlp adam np 4: largest optimizer state %zu of %zu bytes (%.4f)\n",
                stage, largest, full, ratio);
    EXPECT_LE(ratio, 0.30);
    EXPECT_GE(total, full);  // every element's state is somewhere, padding aside
    EXPECT_LE(total, full + 2 * element_size * world * 8);  // < N padding a bucket, < 8 buckets
  }
}

TEST(ZeroStrategy, WorksWithMoreRanksThanParameterTensors) {
  const int batch = 4, steps = 20;
  for (int world : {4, 5}) {
    auto data = synthetic_images(batch * world * steps);
    auto config = config_for("mlp", "adam", batch, steps);
    config.model.mlp_layers = {784, 10};  // two tensors
    auto one_rank = config;
    one_rank.train.batch_size = batch * world;
    auto reference =
        on_ranks(1, [&](comm::Communicator& c) { return train_once(one_rank, c, data); });
    auto allreduce =
        on_ranks(world, [&](comm::Communicator& c) { return train_once(config, c, data); });
    for (int stage : {1, 2, 3}) {
      auto zero = on_ranks(world, [&](comm::Communicator& comm) {
        return train_once(with_zero(config, stage), comm, data);
      });
      const auto worst = expect_equivalent(zero, reference[0], allreduce, steps);
      std::printf("zero stage %d, mlp 784-10 adam np %d: %.3g vs one rank, %.3g vs allreduce\n",
                  stage, world, worst.vs_one_rank, worst.vs_allreduce);
    }
  }
}

// A model of two scalars, y = w x + b, driven through the strategy's hooks as the trainer
// drives them: at 4 ranks, each bucket's block is one element, so ranks 2 and 3 own padding
// only.
struct ScalarRun {
  std::vector<torch::Tensor> params;
  bool grads_kept = false;  // .grad() defined after before_optimizer_step
  std::size_t state_bytes = 0;
};

std::pair<torch::Tensor, torch::Tensor> scalar_samples(int rank, int step) {
  auto x = torch::tensor({0.5 * rank - 1.0, 0.25 * step + 0.5}, torch::kFloat64).view({2, 1});
  return {x, 3 * x - 2 + 0.1 * rank};
}

torch::nn::Linear scalar_model() {
  torch::nn::Linear model(1, 1);
  // float64: see the tolerance in RanksThatOwnOnlyPaddingStillFollowTheReference.
  model->to(torch::kFloat64);
  torch::NoGradGuard no_grad;
  model->weight.fill_(0.5);
  model->bias.fill_(-0.25);
  return model;
}

constexpr int kScalarSteps = 8;

ScalarRun train_scalar_model(comm::Communicator& comm, int stage) {
  auto model = scalar_model();
  torch::optim::Adam optimizer(model->parameters(), torch::optim::AdamOptions(0.1));
  ZeroStrategyOptions options;
  options.stage = stage;
  ZeroStrategy strategy(comm, options);
  strategy.setup(nn::tensors_of(*model));
  ScalarRun run;
  for (int step = 0; step < kScalarSteps; ++step) {
    optimizer.zero_grad();
    strategy.before_backward(true);
    auto [x, y] = scalar_samples(comm.rank(), step);
    (model->forward(x) - y).pow(2).mean().backward();
    strategy.before_optimizer_step();
    run.grads_kept = model->weight.grad().defined() && model->bias.grad().defined();
    strategy.optimizer_step(optimizer);
  }
  for (auto& p : model->parameters()) run.params.push_back(p.detach().clone());
  run.state_bytes = strategy.stats().optimizer_state_bytes;
  return run;
}

TEST(ZeroStrategy, RanksThatOwnOnlyPaddingStillFollowTheReference) {
  const int world = 4;
  auto model = scalar_model();
  torch::optim::Adam optimizer(model->parameters(), torch::optim::AdamOptions(0.1));
  for (int step = 0; step < kScalarSteps; ++step) {
    optimizer.zero_grad();
    std::vector<torch::Tensor> xs, ys;
    for (int r = 0; r < world; ++r) {
      auto [x, y] = scalar_samples(r, step);
      xs.push_back(x);
      ys.push_back(y);
    }
    (model->forward(torch::cat(xs)) - torch::cat(ys)).pow(2).mean().backward();
    optimizer.step();
  }
  for (int stage : {1, 2}) {  // stage 3 needs a model of layers: see Stage3... below
    std::mutex mutex;
    std::vector<ScalarRun> runs(world);
    comm::local::run_ranks(world, {}, [&](comm::Communicator& comm) {
      auto run = train_scalar_model(comm, stage);
      std::lock_guard lock(mutex);
      runs[comm.rank()] = std::move(run);
    });
    for (int r = 0; r < world; ++r) {
      // float64: each step's gradient is a mean of 8 terms summed in another order (at most
      // 8 u = 9e-16 of its size apart), and Adam passes a relative change through at a few
      // times its size: over 8 steps under 1e-13. 1e-9 leaves room and still sits far below
      // a wrong gradient, which moves the parameters by O(0.1).
      for (std::size_t i = 0; i < runs[r].params.size(); ++i) {
        const auto want = model->parameters()[i];
        EXPECT_LE(((runs[r].params[i] - want).norm() / want.norm()).item<double>(), 1e-9)
            << "stage " << stage << " rank " << r << " parameter " << i;
      }
      for (std::size_t i = 0; i < runs[r].params.size(); ++i)
        EXPECT_TRUE(torch::equal(runs[r].params[i], runs[0].params[i])) << "rank " << r;
      // Stage 1 leaves the averaged gradient in .grad(); stage 2 keeps only the shard's.
      EXPECT_EQ(runs[r].grads_kept, stage == 1) << "stage " << stage << " rank " << r;
      EXPECT_EQ(runs[r].state_bytes, 2 * sizeof(double)) << "one element's two Adam moments";
    }
  }
}

// Each rank's shard optimizer (Adam's moments and step counts) goes into the checkpoint and
// comes back to the same rank: k steps, then a resume for k more, equal 2k steps straight.
TEST(ZeroStrategy, ResumeContinuesExactlyAtEveryStage) {
  const int world = 3, batch = 4, k = 5;
  data::testing::TempDir dir;
  auto data = synthetic_images(batch * world * 2 * k);
  for (int stage : {1, 2, 3}) {
    const auto config = with_zero(config_for("mlp", "adam", batch, 2 * k), stage);
    auto straight =
        on_ranks(world, [&](comm::Communicator& comm) { return train_once(config, comm, data); });
    auto first = config;
    first.train.max_steps = k;
    first.train.checkpoint_dir = dir.file(cat("stage", stage));
    on_ranks(world, [&](comm::Communicator& comm) { return train_once(first, comm, data); });
    auto resumed = on_ranks(world, [&](comm::Communicator& comm) {
      return train_once(config, comm, data, first.train.checkpoint_dir);
    });
    for (int r = 0; r < world; ++r)
      for (std::size_t i = 0; i < straight[r].params.size(); ++i)
        EXPECT_TRUE(torch::equal(resumed[r].params[i], straight[r].params[i]))
            << "stage " << stage << " rank " << r << " parameter " << i;
  }
}

// An elastic restart: `before` ranks take k steps and checkpoint, then `after` resume from
// that checkpoint for k more, 3 -> 2 and 2 -> 3. ZeRO cuts its saved optimizer shards into the
// new world's blocks and must go on as all-reduce does from its own checkpoint (whose
// optimizer state is whole), within the trajectory tolerance of the 2k float64 steps the two
// runs took apart (their first k already differ by rounding): with SGD's momentum and with
// Adam's moments and step count. Dropping or misplacing any element's state moves the
// parameters by a sizeable fraction of the distance they travel.
TEST(ZeroStrategy, ResumedOnAnotherNumberOfRanksGoesOnAsAllreduceDoes) {
  const int batch = 4, k = 5;
  data::testing::TempDir dir;
  const auto data = synthetic_images(batch * 3 * 4 * k);
  auto resized = [&](TrainConfig config, const std::string& ckpt, int before, int after) {
    auto first = config;
    first.train.max_steps = k;
    first.train.checkpoint_dir = ckpt;
    on_ranks(before, [&](comm::Communicator& comm) { return train_once(first, comm, data); });
    return on_ranks(after, [&](comm::Communicator& comm) {
      Trainer trainer(config, comm, data);
      trainer.resume(ckpt, WorldChange::elastic);
      RankOutcome o;
      o.initial = trainer.parameter_values();
      o.result = trainer.run();
      o.params = trainer.parameter_values();
      return o;
    });
  };
  // Growing is checked with Adam, whose moments and step count are the most state to re-cut.
  for (const auto& [before, after, optim] :
       {std::tuple{3, 2, "sgd"}, std::tuple{3, 2, "adam"}, std::tuple{2, 3, "adam"}}) {
    const auto config = config_for("mlp", optim, batch, 2 * k);
    const auto name = cat(optim, "_", before, "to", after);
    const auto reference = resized(config, dir.file(name + "_allreduce"), before, after);
    for (int stage : {1, 2, 3}) {
      const auto zero =
          resized(with_zero(config, stage), dir.file(cat(name, "_zero", stage)), before, after);
      for (int r = 0; r < after; ++r) {
        EXPECT_EQ(zero[r].result.global_step, 2 * k);
        EXPECT_LE(trajectory_difference(zero[r], reference[r]), trajectory_tolerance(2 * k))
            << optim << " " << before << " -> " << after << " ranks, stage " << stage << " rank "
            << r;
      }
    }
  }
}

// Clipping by the global norm: ZeRO computes the norm from every rank's shard, and so clips
// as all-reduce and one rank on the N-times batch do (they clip the whole averaged gradient).
TEST(ZeroStrategy, ClippingByGlobalNormEqualsAllreduceAndOneRank) {
  const int world = 3, batch = 4, steps = 20;
  auto data = synthetic_images(batch * world * steps);
  auto config = config_for("mlp", "sgd", batch, steps);
  config.train.clip_grad_norm = 0.05;  // below the gradients' norm (about 1): clipping acts
  auto one_rank = config;
  one_rank.train.batch_size = batch * world;
  auto reference =
      on_ranks(1, [&](comm::Communicator& c) { return train_once(one_rank, c, data); });
  auto allreduce =
      on_ranks(world, [&](comm::Communicator& c) { return train_once(config, c, data); });
  for (int stage : {1, 2, 3}) {
    auto zero = on_ranks(world, [&](comm::Communicator& comm) {
      return train_once(with_zero(config, stage), comm, data);
    });
    expect_equivalent(zero, reference[0], allreduce, steps);
  }
  auto unclipped = one_rank;
  unclipped.train.clip_grad_norm = 0;
  auto free_run =
      on_ranks(1, [&](comm::Communicator& c) { return train_once(unclipped, c, data); });
  EXPECT_GT(trajectory_difference(free_run[0], reference[0]), 1000 * trajectory_tolerance(steps))
      << "the clip must change the trajectory, or this test shows nothing";
}

// Stage 3 between and during steps: how many layers' parameters exist at once, from the
// parameters' own storage (a freed layer's is empty). An MLP of 8 Linear layers, driven as the
// trainer drives it: between steps no layer is whole; during backward, the layer that runs and
// the one prefetched below it (and, while the first gradients arrive, the last layer, which
// forward kept) at most.
// Three layers' parameters: the one whose backward runs, the one below it being gathered, and
// the last one kept from the forward. Three gradient buffers: the one filling, the one reducing
// and the one before it finishing (settle_before in zero_strategy.cc).
TEST(ZeroStrategy, Stage3HoldsAtMostThreeLayersAtOnceAndNoneBetweenSteps) {
  const int world = 3, layers = 8, steps = 3;
  std::vector<std::int64_t> widths(layers + 1, 8);
  comm::local::run_ranks(world, {}, [&](comm::Communicator& comm) {
    torch::manual_seed(7);
    auto model = nn::make_model({.name = "mlp", .mlp_layers = widths});
    model.to(torch::kFloat64);
    torch::optim::SGD optimizer(model.parameters(), torch::optim::SGDOptions(0.1));
    ZeroStrategy strategy(comm, {.stage = 3});
    strategy.attach(model);
    strategy.setup(model.tensors());
    const auto params = model.parameters();
    auto whole_layers = [&] {  // a Linear's weight and bias, both gathered or both freed
      std::size_t whole = 0;
      for (const auto& p : params) whole += p.storage().nbytes() > 0;
      return whole / 2;
    };
    std::size_t most = 0, most_buffers = 0;
    std::vector<unsigned> hooks;
    for (auto& p : params)
      hooks.push_back(p.register_hook([&](const torch::Tensor&) {
        most = std::max(most, whole_layers());
        most_buffers = std::max(most_buffers, strategy.gradient_buffers_held());
      }));
    for (int step = 0; step < steps; ++step) {
      optimizer.zero_grad();
      strategy.before_backward(true);
      auto x = torch::randn({4, 8}, torch::kFloat64);
      model.forward(x).square().mean().backward();
      strategy.before_optimizer_step();
      strategy.optimizer_step(optimizer);
      EXPECT_EQ(whole_layers(), 0u) << "rank " << comm.rank() << " after step " << step;
    }
    for (std::size_t k = 0; k < params.size(); ++k) params[k].remove_hook(hooks[k]);
    EXPECT_LE(most, 3u) << "rank " << comm.rank();
    EXPECT_GE(most, 1u) << "rank " << comm.rank() << ": a layer runs its backward whole";
    EXPECT_LE(most_buffers, 3u) << "rank " << comm.rank();
    EXPECT_EQ(strategy.gradient_buffers_held(), 0u) << "rank " << comm.rank();
    {  // an evaluation gathers and frees layer by layer too
      torch::NoGradGuard no_grad;
      model.forward(torch::randn({4, 8}, torch::kFloat64));
    }
    EXPECT_EQ(whole_layers(), 0u) << "rank " << comm.rank() << " after an evaluation";
    // The checksum the trainer reports, read one layer at a time, is the whole model's.
    Fnv1a in_turn;
    std::size_t most_reading = 0;
    strategy.read_parameters_in_turn(params, [&](std::size_t i) {
      most_reading = std::max(most_reading, whole_layers());
      mix_into(in_turn, params[i]);
    });
    EXPECT_LE(most_reading, 1u) << "rank " << comm.rank();
    strategy.gather_model();  // whole again, and the same on every rank
    EXPECT_EQ(whole_layers(), static_cast<std::size_t>(layers));
    check_replicas_agree(model.tensors(), comm);
    Fnv1a whole;
    for (const auto& p : params) mix_into(whole, p);
    EXPECT_EQ(in_turn.value(), whole.value()) << "rank " << comm.rank();
  });
}

}  // namespace
}  // namespace distml::train
