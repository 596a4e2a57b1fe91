// The learning rate each algorithm's optimizer steps with, as its update lines report it (read
// from the optimizer after the step), against the linear schedule written out here: with
// algo.anneal_lr, lr0 (1 - done / total), where done is the part of the run before the update:
//   ppo, a2c  updates before this one, of ceil(run.env_steps / (unroll x copies x ranks));
//   a3c       gradients applied before this one, of run.env_steps / (unroll x copies);
//   impala    env steps trained on before this update (batch_unrolls x unroll x copies each), of
//             run.env_steps;
//   apex      env steps taken when the update starts (its env_steps), of run.env_steps.
#include <gtest/gtest.h>

#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "distml/comm/local/local_world.h"
#include "distml/rl/algos/algorithm.h"

namespace distml::rl {
namespace {

std::vector<nlohmann::json> update_lines(const RlConfig& c, int ranks) {
  std::vector<nlohmann::json> updates;
  std::mutex mutex;
  comm::local::run_ranks(ranks, {}, [&](comm::Communicator& comm) {
    RunHooks hooks;
    hooks.event = [&](const nlohmann::json& e) {
      std::lock_guard lock(mutex);
      if (e["event"] == "update") updates.push_back(e);
    };
    run_algorithm(c, comm, hooks);
  });
  return updates;
}

struct ScheduleCase {
  std::string name;
  std::vector<std::string> overrides;
  int ranks;
  // The fraction of the run done before the update of this line.
  std::function<double(const nlohmann::json& line, const RlConfig& c)> done;
  // Whether the last update comes within a fifth of the run's end. Ape-X's env steps arrive in
  // the actors' batches of transitions, hundreds at a time in these short runs.
  bool ends_near_zero = true;
};

void PrintTo(const ScheduleCase& c, std::ostream* os) { *os << c.name; }

class AnnealedLr : public ::testing::TestWithParam<ScheduleCase> {};

std::int64_t update_of(const nlohmann::json& line) { return line["update"].get<std::int64_t>(); }

// Every update line's lr is lr0 (1 - done); the lines span the run, so the last ones are near 0.
TEST_P(AnnealedLr, UpdateLinesCarryTheLinearlyAnnealedRate) {
  const ScheduleCase& s = GetParam();
  std::vector<std::string> overrides = s.overrides;
  for (const char* o :
       {"algo.anneal_lr=true", "optim.lr=0.002", "run.log_every=1", "run.eval_episodes=1"})
    overrides.push_back(o);
  const RlConfig c = load_rl_config("", overrides);
  const std::vector<nlohmann::json> lines = update_lines(c, s.ranks);
  ASSERT_GE(lines.size(), 10u);
  double smallest = 1;
  for (const auto& line : lines) {
    ASSERT_TRUE(line.contains("lr")) << line.dump();
    const double expected = 0.002 * std::max(0.0, 1.0 - s.done(line, c));
    // The schedule's formula on both sides, from the same integers: a few roundings each.
    EXPECT_DOUBLE_EQ(line["lr"].get<double>(), expected) << line.dump();
    smallest = std::min(smallest, line["lr"].get<double>() / 0.002);
  }
  // The runs end within a few updates of their env steps (impala: within the unrolls still
  // queued, under a fifth of these runs), so the last rates are near 0.
  if (s.ends_near_zero) EXPECT_LT(smallest, 0.2);
}

double fraction(std::int64_t done, std::int64_t total) {
  return static_cast<double>(done) / static_cast<double>(total);
}

INSTANTIATE_TEST_SUITE_P(
    EveryAlgorithm, AnnealedLr,
    ::testing::Values(
        ScheduleCase{"ppo",
                     {"algo.name=ppo", "env.copies=2", "algo.unroll=16", "run.env_steps=1280"},
                     2,
                     [](const nlohmann::json& l, const RlConfig&) {
                       return fraction(update_of(l) - 1, 20);  // 1280 / (16 x 2 x 2)
                     }},
        ScheduleCase{"a2c",
                     {"algo.name=a2c", "env.copies=2", "algo.unroll=16", "run.env_steps=1200"},
                     3,
                     [](const nlohmann::json& l, const RlConfig&) {
                       return fraction(update_of(l) - 1, 13);  // ceil(1200 / (16 x 2 x 3))
                     }},
        ScheduleCase{"a3c",
                     {"algo.name=a3c", "env.copies=2", "algo.unroll=8", "run.env_steps=800"},
                     3,
                     [](const nlohmann::json& l, const RlConfig&) {
                       return fraction(update_of(l) - 1, 50);  // 800 / (8 x 2)
                     }},
        ScheduleCase{"impala",
                     {"algo.name=impala", "env.copies=2", "algo.unroll=10", "run.env_steps=2000"},
                     2,
                     [](const nlohmann::json& l, const RlConfig&) {
                       return fraction((update_of(l) - 1) * 40, 2000);  // 2 unrolls x 10 x 2
                     }},
        ScheduleCase{"apex",
                     {"algo.name=apex", "apex.learning_starts=200", "apex.batch_size=16",
                      "apex.env_steps_per_update=8", "run.env_steps=1500"},
                     3,
                     [](const nlohmann::json& l, const RlConfig&) {
                       return fraction(l["env_steps"].get<std::int64_t>(), 1500);
                     },
                     false},
        ScheduleCase{"apex_dpg",
                     {"algo.name=apex_dpg", "env.name=pendulum", "apex.learning_starts=200",
                      "apex.batch_size=16", "apex.env_steps_per_update=8", "run.env_steps=1000"},
                     3,
                     [](const nlohmann::json& l, const RlConfig&) {
                       return fraction(l["env_steps"].get<std::int64_t>(), 1000);
                     },
                     false}),
    [](const ::testing::TestParamInfo<ScheduleCase>& info) { return info.param.name; });

// Without annealing every step uses optim.lr (impala's default anneals; here it is turned off).
TEST(ConstantLr, UpdateLinesCarryTheConfiguredRate) {
  for (const std::string algo : {"ppo", "impala"}) {
    const RlConfig c = load_rl_config(
        "", {"algo.name=" + algo, "algo.anneal_lr=false", "optim.lr=0.003", "env.copies=2",
             "algo.unroll=16", "run.env_steps=640", "run.log_every=1", "run.eval_episodes=1"});
    const auto lines = update_lines(c, 2);
    ASSERT_FALSE(lines.empty()) << algo;
    for (const auto& line : lines) EXPECT_EQ(line["lr"].get<double>(), 0.003) << algo;
  }
}

}  // namespace
}  // namespace distml::rl
