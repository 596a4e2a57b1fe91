// The parameter server against its references: in bsp mode it is synchronous SGD (the
// allreduce strategy on the workers alone); ssp keeps its staleness bound and asp lets the
// others run on while one worker is slow; a silent server stops its workers by name.
#include "distml/train/strategies/ps_strategy.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <limits>
#include <mutex>
#include <string>

#include "../data/temp_dir.h"
#include "distml/comm/local/local_world.h"
#include "distml/core/error.h"
#include "distml/train/strategies/ps_protocol.h"
#include "trainer_fixture.h"

namespace distml::train {
namespace {

using testing::config_for;
using testing::on_ranks;
using testing::synthetic_images;
using testing::train_once;
using testing::trajectory_difference;
using testing::trajectory_tolerance;

TrainConfig with_ps(TrainConfig c, int servers, const std::string& mode) {
  c.strategy.name = "ps";
  c.strategy.servers = servers;
  c.strategy.mode = mode;
  return c;
}

struct PsCase {
  std::string model;
  int workers, servers;
};

class PsBsp : public ::testing::TestWithParam<PsCase> {};

TEST_P(PsBsp, EqualsAllreduceOnTheWorkers) {
  const auto& [model, workers, servers] = GetParam();
  const int batch = 4, steps = 20;
  auto data = synthetic_images(batch * workers * steps);
  const auto config = config_for(model, "sgd", batch, steps);
  auto allreduce =
      on_ranks(workers, [&](comm::Communicator& comm) { return train_once(config, comm, data); });
  auto ps = on_ranks(workers + servers, [&](comm::Communicator& comm) {
    return train_once(with_ps(config, servers, "bsp"), comm, data);
  });
  double worst = 0;
  for (int w = 0; w < workers; ++w) {
    const double d = trajectory_difference(ps[w], allreduce[w]);
    EXPECT_LE(d, trajectory_tolerance(steps)) << "worker " << w;
    EXPECT_EQ(ps[w].result.param_checksum, ps[0].result.param_checksum) << "worker " << w;
    EXPECT_EQ(ps[w].result.steps, steps);
    worst = std::max(worst, d);
  }
  const auto& report = ps[0].result.strategy_report;
  EXPECT_EQ(report.at("server_updates").get<int>(), steps * servers);
  EXPECT_EQ(report.at("max_clock_gap").get<int>(), 0);
  EXPECT_EQ(report.at("staleness_histogram"), nlohmann::json::array({workers * servers * steps}));
  std::printf("ps bsp %s, %d workers + %d servers: worst relative difference %.3g\n", model.c_str(),
              workers, servers, worst);
}

INSTANTIATE_TEST_SUITE_P(WorkersServers, PsBsp,
                         ::testing::Values(PsCase{"mlp", 2, 1}, PsCase{"mlp", 4, 2},
                                           PsCase{"mlp", 3, 2}, PsCase{"lenet5", 2, 1},
                                           PsCase{"lenet5", 4, 2}),
                         [](const auto& info) {
                           return info.param.model + "_" + std::to_string(info.param.workers) +
                                  "w_" + std::to_string(info.param.servers) + "s";
                         });

// Worker 0 computes 20x slower than the other two.
nlohmann::json report_with_a_straggler(const std::string& mode, int staleness) {
  auto data = synthetic_images(4 * 3 * 12);
  auto config = with_ps(config_for("mlp", "sgd", 4, 12), 1, mode);
  config.strategy.staleness = staleness;
  config.train.slow_rank = 0;
  config.train.slow_factor = 20;
  auto ranks =
      on_ranks(4, [&](comm::Communicator& comm) { return train_once(config, comm, data); });
  for (int w = 0; w < 3; ++w)  // the final sync leaves every worker with the same model
    EXPECT_EQ(ranks[w].result.param_checksum, ranks[0].result.param_checksum) << "worker " << w;
  const auto& report = ranks[0].result.strategy_report;
  std::printf("ps %s s=%d with a 20x straggler: %s\n", mode.c_str(), staleness,
              report.dump().c_str());
  return report;
}

TEST(PsSsp, NoWorkerGetsMoreThanStalenessStepsAhead) {
  for (int s : {0, 2}) {
    const auto report = report_with_a_straggler("ssp", s);
    EXPECT_LE(report.at("max_clock_gap").get<int>(), s) << report.dump();
    EXPECT_EQ(report.at("server_updates").get<int>(), 3 * 12);
  }
}

TEST(PsAsp, OthersRunOnWhileOneWorkerIsSlow) {
  const auto report = report_with_a_straggler("asp", 0);
  // With no bound, the two fast workers finish far ahead of the slow one...
  EXPECT_GE(report.at("max_clock_gap").get<int>(), 6) << report.dump();
  // ...so the slow worker's gradients arrive after many of theirs.
  EXPECT_GE(report.at("staleness_histogram").size(), 4u) << report.dump();
  EXPECT_EQ(report.at("server_updates").get<int>(), 3 * 12);
}

TEST(Ps, ASilentServerStopsItsWorkersByName) {
  comm::CommOptions options;
  options.timeout = comm::Millis(1000);
  std::mutex mutex;
  std::vector<std::string> errors(2);
  comm::local::run_ranks(3, options, [&](comm::Communicator& comm) {
    torch::nn::Linear net(4, 2);
    PsStrategy strategy(comm, PsStrategyOptions{});
    strategy.setup(nn::tensors_of(*net));
    if (!strategy.trains()) return;  // the server never serves: as if it had died
    torch::optim::SGD opt(net->parameters(), 0.1);
    try {
      strategy.before_backward(true);
      net->forward(torch::ones({3, 4})).sum().backward();
      strategy.before_optimizer_step();
      strategy.optimizer_step(opt);
    } catch (const TimeoutError& e) {
      std::lock_guard lock(mutex);
      errors[comm.rank()] = e.what();
    }
  });
  for (int w = 0; w < 2; ++w)
    EXPECT_NE(errors[w].find("parameter server rank 2 sent no parameters"), std::string::npos)
        << "worker " << w << ": " << errors[w];
}

TEST(Ps, ASilentWorkerStopsTheServerByName) {
  comm::CommOptions options;
  options.timeout = comm::Millis(500);
  std::string error;
  comm::local::run_ranks(2, options, [&](comm::Communicator& comm) {
    torch::nn::Linear net(4, 2);
    PsStrategy strategy(comm, PsStrategyOptions{});
    strategy.setup(nn::tensors_of(*net));
    if (strategy.trains()) return;  // the worker never pushes
    try {
      strategy.serve();
    } catch (const TimeoutError& e) {
      error = e.what();
    }
  });
  EXPECT_NE(error.find("parameter server rank 1: no message from worker(s) 0"), std::string::npos)
      << error;
}

// The servers read no checkpoint: worker 0 collects their optimizer state (momentum) into it
// and hands it back, with the parameters, after a resume. In bsp, k steps and a resume for k
// more equal 2k steps straight, bit for bit, whatever the number of servers.
class PsResume : public ::testing::TestWithParam<PsCase> {};

TEST_P(PsResume, KStepsThenKMoreEqualTwoKStraight) {
  const auto& [model, workers, servers] = GetParam();
  const int batch = 4, k = 5;
  data::testing::TempDir dir;
  auto data = synthetic_images(batch * workers * 2 * k);
  const auto config = with_ps(config_for(model, "sgd", batch, 2 * k), servers, "bsp");
  const int world = workers + servers;
  auto straight =
      on_ranks(world, [&](comm::Communicator& comm) { return train_once(config, comm, data); });
  auto first = config;
  first.train.max_steps = k;
  first.train.checkpoint_dir = dir.file("ckpt");
  on_ranks(world, [&](comm::Communicator& comm) { return train_once(first, comm, data); });
  auto resumed = on_ranks(world, [&](comm::Communicator& comm) {
    return train_once(config, comm, data, dir.file("ckpt"));
  });
  for (int w = 0; w < workers; ++w)
    for (std::size_t i = 0; i < straight[w].params.size(); ++i)
      EXPECT_TRUE(torch::equal(resumed[w].params[i], straight[w].params[i]))
          << "worker " << w << " parameter " << i;
}

INSTANTIATE_TEST_SUITE_P(WorkersServers, PsResume,
                         ::testing::Values(PsCase{"mlp", 2, 1}, PsCase{"mlp", 3, 2}),
                         [](const auto& info) {
                           return info.param.model + "_" + std::to_string(info.param.workers) +
                                  "w" + std::to_string(info.param.servers) + "s";
                         });

TEST(Ps, ServersMustLeaveAWorker) {
  auto data = synthetic_images(16);
  auto config = with_ps(config_for("mlp", "sgd", 4, 1), 2, "bsp");
  std::mutex mutex;
  std::vector<std::string> errors(2);
  comm::local::run_ranks(2, {}, [&](comm::Communicator& comm) {
    try {
      Trainer trainer(config, comm, data);
    } catch (const ConfigError& e) {
      std::lock_guard lock(mutex);
      errors[comm.rank()] = e.what();
    }
  });
  for (int r = 0; r < 2; ++r)
    EXPECT_NE(
        errors[r].find("strategy.servers = 2 must leave at least one of the 2 ranks a worker"),
        std::string::npos)
        << errors[r];
}

// What a server and its workers read from each other besides tensors: a size announced for an
// optimizer state is checked before anything is allocated (a negative one used to become a
// 2^64-byte string), and an unknown control word names its worker and server.
TEST(PsProtocol, AnnouncedStateSizesAndControlWordsAreChecked) {
  const auto layout = ps::Layout::plan({4000, 400}, {1000, 100}, 2, 1, 1 << 10, 4 << 10);
  const std::size_t limit = layout.max_state_bytes(0);
  EXPECT_GE(limit, 3 * 4400u) << "room for Adam's two moments and amsgrad's maximum";
  EXPECT_EQ(ps::checked_state_size(0, limit, 2), 0u);
  EXPECT_EQ(ps::checked_state_size(static_cast<std::int64_t>(limit), limit, 2), limit);
  for (const std::int64_t bad : {std::int64_t{-1}, static_cast<std::int64_t>(limit) + 1,
                                 std::numeric_limits<std::int64_t>::max()}) {
    try {
      ps::checked_state_size(bad, limit, 2);
      ADD_FAILURE() << "accepted " << bad;
    } catch (const CommError& e) {
      EXPECT_NE(std::string(e.what()).find("rank 2 announced"), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(ps::decode_control(ps::kStop, 1, 2), ps::Control::stop);
  EXPECT_THROW(ps::decode_control(0.5, 1, 2), CommError);
}

}  // namespace
}  // namespace distml::train
