// An environment of one's own, registered by name and trained by distml's PPO:
//   build/examples/rl_own_env                       (2 ranks as threads of this process)
//   distml launch -n 2 -- build/examples/rl_own_env mpi
#include <cstdio>
#include <memory>

#include "distml/core/error.h"
#include "distml/rl/run.h"

namespace rl = distml::rl;

// A corridor of 10 cells: start in one of the first three, step left (0) or right (1); the right
// end pays 1 and ends the episode, every step costs 0.01, and 50 steps cut it short. The agent
// sees its position as a fraction of the corridor.
class Corridor : public rl::Env {
 public:
  std::string_view name() const override { return "corridor"; }
  const rl::Space& observation_space() const override { return observation_; }
  const rl::Space& action_space() const override { return action_; }

  std::vector<float> reset(std::uint64_t seed) override {
    position_ = static_cast<int>(seed % 3);
    steps_ = 0;
    return {position_ / 10.0f};
  }

  rl::StepResult step(std::span<const float> action) override {
    if (action.size() != 1 || (action[0] != 0 && action[0] != 1))
      throw distml::Error("corridor: the action must be 0 (left) or 1 (right)");
    position_ = std::max(0, position_ + (action[0] == 1 ? 1 : -1));
    ++steps_;
    rl::StepResult r;
    r.observation = {position_ / 10.0f};
    r.terminated = position_ == 10;
    r.truncated = !r.terminated && steps_ == 50;
    r.reward = (r.terminated ? 1.0 : 0.0) - 0.01;
    return r;
  }

 private:
  rl::Space observation_ = rl::Space::box({0}, {1});
  rl::Space action_ = rl::Space::discrete(2);
  int position_ = 0, steps_ = 0;
};

int main(int argc, char** argv) try {
  rl::register_env("corridor", [] { return std::make_unique<Corridor>(); });
  const rl::RlConfig config = rl::load_rl_config(
      "", {"algo.name=ppo", "env.name=corridor", "env.copies=4", "algo.unroll=32",
           "run.env_steps=20000", "run.eval_episodes=20", "run.log_every=0"});
  rl::RunOptions options;
  if (argc > 1) options.engine = argv[1];
  const rl::RunResult result = rl::run(config, options);
  if (result.eval_episodes > 0)  // the learner's rank
    std::printf("corridor: mean return %.3f over %lld evaluation episodes after %lld env steps\n",
                result.eval_mean_return, static_cast<long long>(result.eval_episodes),
                static_cast<long long>(result.env_steps));
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "rl_own_env: %s\n", e.what());
  return dynamic_cast<const distml::Error*>(&e) ? 2 : 1;
}
