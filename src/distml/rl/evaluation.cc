#include "distml/rl/evaluation.h"

#include "distml/rl/envs/env.h"
#include "distml/rl/policy.h"

namespace distml::rl {

Evaluation evaluate(std::string_view env_name, std::int64_t episodes, std::uint64_t seed,
                    const Policy& policy, const EnvOptions& options) {
  torch::NoGradGuard no_grad;
  auto env = make_env(env_name, options);
  const int obs = env->observation_space().size();
  Evaluation e;
  // Evaluation seeds never meet the training seeds, which count up from the run's seed.
  const std::uint64_t base = seed ^ 0x5eed0f0e7a1ULL;
  for (std::int64_t i = 0; i < episodes; ++i) {
    std::int64_t step = 0;
    // Only the environment's own failures get its context; the policy's pass as they are.
    auto in_env = [&](auto&& call) {
      try {
        return call();
      } catch (const std::exception& failure) {
        throw env_failure(env_name, cat("evaluation episode ", i + 1, ", step ", step), failure);
      }
    };
    std::vector<float> o = in_env(
        [&] { return env->reset(base + static_cast<std::uint64_t>(i) * 0x9e3779b97f4a7c15ULL); });
    double total = 0;
    for (;;) {
      const std::vector<float> action = policy(as_tensor(o, obs));
      ++step;
      const StepResult s = in_env([&] { return env->step(action); });
      total += s.reward;
      if (s.terminated || s.truncated) break;
      o = s.observation;
    }
    e.returns.push_back(total);
    e.mean_return += total / static_cast<double>(episodes);
  }
  e.episodes = episodes;
  return e;
}

}  // namespace distml::rl
