// The actor-learner plumbing: typed messages (sizes validated, order kept, no deadlock when two
// ranks send large messages to each other), lost actors reported by rank, and seeded learning.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <mutex>

#include "distml/comm/local/local_world.h"
#include "distml/core/error.h"
#include "distml/rl/algos/algorithm.h"
#include "distml/rl/message.h"

namespace distml::rl {
namespace {

using ::testing::HasSubstr;

TEST(Messages, ArriveInOrderWithTheirPayloads) {
  comm::local::run_ranks(2, {}, [](comm::Communicator& comm) {
    if (comm.rank() == 1) {
      send_message(comm, 0, Channel::from_learner, {MessageKind::parameters, 7, 3, {1, 2, 3}});
      send_message(comm, 0, Channel::from_learner, {MessageKind::parameters, 8, 4, {4, 5, 6}});
      send_message(comm, 0, Channel::from_learner, {MessageKind::stop, 0, 0, {}});
      return;
    }
    MessageListener listener(comm, 1, Channel::from_learner,
                             exact_size(MessageKind::parameters, 3));
    const Message a = listener.take(), b = listener.take(), c = listener.take();
    EXPECT_EQ(a.version, 7u);
    EXPECT_EQ(a.extra, 3u);
    EXPECT_EQ(a.payload, (std::vector<float>{1, 2, 3}));
    EXPECT_EQ(b.version, 8u);
    EXPECT_EQ(b.payload, (std::vector<float>{4, 5, 6}));
    EXPECT_EQ(c.kind, MessageKind::stop);
    EXPECT_TRUE(c.payload.empty());
  });
}

TEST(Messages, WrongSizeIsRejectedNamingTheSender) {
  comm::local::run_ranks(2, {}, [](comm::Communicator& comm) {
    if (comm.rank() == 1) {
      send_message(comm, 0, Channel::to_learner,
                   {MessageKind::unroll, 0, 0, std::vector<float>(10)});
      return;
    }
    MessageListener listener(comm, 1, Channel::to_learner, exact_size(MessageKind::unroll, 12));
    try {
      listener.take();
      ADD_FAILURE() << "a 10-float unroll was accepted where 12 floats were expected";
    } catch (const CommError& e) {
      EXPECT_THAT(e.what(), HasSubstr("rank 1"));
      EXPECT_THAT(e.what(), HasSubstr("unroll message of 10 floats, expected 12"));
    }
  });
}

TEST(Messages, WrongKindIsRejected) {
  comm::local::run_ranks(2, {}, [](comm::Communicator& comm) {
    if (comm.rank() == 1) {
      send_message(comm, 0, Channel::to_learner, {MessageKind::gradients, 0, 0, {1, 2}});
      return;
    }
    MessageListener listener(comm, 1, Channel::to_learner, exact_size(MessageKind::unroll, 2));
    EXPECT_THROW(listener.take(), CommError);
  });
}

// Each rank sends the other a message too large to be buffered, then waits for its delivery:
// wait_serving keeps receiving meanwhile, so neither waits for the other forever.
TEST(Messages, CrossedLargeSendsComplete) {
  comm::local::run_ranks(2, {}, [](comm::Communicator& comm) {
    const int peer = 1 - comm.rank();
    const std::size_t n = 1 << 20;
    MessageListener listener(comm, peer, Channel::to_replay,
                             exact_size(MessageKind::parameters, n));
    PendingSend send(comm, peer, Channel::to_replay,
                     {MessageKind::parameters, static_cast<std::uint64_t>(comm.rank()), 0,
                      std::vector<float>(n, static_cast<float>(comm.rank()))});
    std::vector<Message> got;
    wait_serving(
        send, peer, listener, [&](Message m) { got.push_back(std::move(m)); }, comm::Millis(20000));
    if (got.empty()) got.push_back(listener.take());
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].version, static_cast<std::uint64_t>(peer));
    EXPECT_EQ(got[0].payload.back(), static_cast<float>(peer));
  });
}

RlConfig small_run(const std::string& algo) {
  RlConfig c;
  c.algo.name = algo;
  c.env.copies = 2;
  c.algo.unroll = 16;
  c.run.env_steps = 4000;
  c.run.eval_episodes = 2;
  c.run.log_every = 0;
  c.run.timeout_s = 20;
  c.impala.batch_unrolls = 1;
  c.impala.max_unrolls_ahead = 2;
  c.apex.learning_starts = 100;
  return c;
}

struct Events {
  std::mutex mutex;
  std::vector<nlohmann::json> all;
  RunHooks hooks() {
    RunHooks h;
    h.event = [this](const nlohmann::json& e) {
      std::lock_guard lock(mutex);
      all.push_back(e);
    };
    return h;
  }
  std::vector<nlohmann::json> of_kind(const std::string& kind) {
    std::vector<nlohmann::json> out;
    for (const auto& e : all)
      if (e["event"] == kind) out.push_back(e);
    return out;
  }
};

// Runs `config` on `ranks` in-process ranks; every rank reports to `events`.
RunResult run_on(int ranks, const RlConfig& config, Events& events) {
  RunResult result;
  comm::CommOptions options;  // as distml rl sets them
  options.timeout = comm::Millis(static_cast<long long>(config.run.timeout_s * 1000));
  comm::local::run_ranks(ranks, options, [&](comm::Communicator& comm) {
    RunResult r = run_algorithm(config, comm, events.hooks());
    if (comm.rank() == 0) result = r;
  });
  return result;
}

TEST(LostActor, ImpalaReportsItByRankAndContinues) {
  RlConfig c = small_run("impala");
  c.run.fault_actor = 2;
  c.run.fault_after = 3;
  c.run.actor_timeout_s = 1;
  Events events;
  const RunResult r = run_on(3, c, events);
  const auto lost = events.of_kind("actor_lost");
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_EQ(lost[0]["rank"], 2);
  EXPECT_EQ(lost[0]["action"], "continue");
  EXPECT_EQ(r.report["actors_lost"], nlohmann::json::array({2}));
  EXPECT_GE(r.env_steps, c.run.env_steps);
  EXPECT_EQ(r.eval_episodes, 2);
}

TEST(LostActor, ImpalaStopsWithAnErrorNamingTheRankWhenAsked) {
  RlConfig c = small_run("impala");
  c.run.fault_actor = 1;
  c.run.fault_after = 2;
  c.run.actor_timeout_s = 1;
  c.run.timeout_s = 3;  // the other actor notices the learner is gone
  c.run.env_steps = 1000000;
  c.run.on_actor_loss = "stop";
  Events events;
  try {
    run_on(3, c, events);
    ADD_FAILURE() << "the run went on without its actor";
  } catch (const CommError& e) {
    EXPECT_THAT(e.what(), HasSubstr("actor rank 1 is lost"));
  }
}

TEST(LostActor, ApexReplayReportsItAndTheRunFinishes) {
  RlConfig c = small_run("apex");
  c.run.fault_actor = 2;
  c.run.fault_after = 2;
  c.run.actor_timeout_s = 1;
  c.apex.actor_batch = 16;
  Events events;
  const RunResult r = run_on(4, c, events);  // learner, actors 1 and 2, replay 3
  const auto lost = events.of_kind("actor_lost");
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_EQ(lost[0]["rank"], 2);
  EXPECT_GE(r.env_steps, c.run.env_steps);
}

TEST(LostActor, A3cHolderReportsItAndContinues) {
  RlConfig c = small_run("a3c");
  c.run.fault_actor = 1;
  c.run.fault_after = 2;
  c.run.actor_timeout_s = 1;
  Events events;
  const RunResult r = run_on(3, c, events);
  const auto lost = events.of_kind("actor_lost");
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_EQ(lost[0]["rank"], 1);
  EXPECT_EQ(r.report["actors_lost"], nlohmann::json::array({1}));
}

// PPO on CartPole from a fixed seed passes a mean return of 150 within 30k environment steps,
// and the same seed gives the same run.
TEST(Learning, SeededPpoSolvesCartPoleBeyond150) {
  RlConfig c;
  c.algo.name = "ppo";
  c.env.copies = 8;
  c.algo.unroll = 64;
  c.run.env_steps = 30000;
  c.run.eval_episodes = 20;
  c.run.log_every = 0;
  Events events;
  const RunResult a = run_on(2, c, events);
  EXPECT_GE(a.eval_mean_return, 150) << "after " << a.env_steps << " env steps";
  const RunResult b = run_on(2, c, events);
  EXPECT_EQ(a.eval_mean_return, b.eval_mean_return);
  EXPECT_EQ(a.report["train_return"], b.report["train_return"]);
}

// An algorithm name that no runner has is refused on every rank, not run as Ape-X (a config
// built in code passes no config check first).
TEST(RunAlgorithm, AnUnknownNameIsAUsageErrorNamingIt) {
  Events events;
  try {
    run_on(2, small_run("dqn"), events);
    FAIL() << "ran an unknown algorithm";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("unknown algorithm 'dqn'"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace distml::rl
