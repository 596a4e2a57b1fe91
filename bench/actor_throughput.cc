// Sampling throughput of one PPO actor (collect_rollout: inference, sampling, environment
// steps) with each number of environment workers, the settings taking turns round by round so
// that they share the machine's noise. Prints one JSON line per setting: the median env steps/s
// over the rounds, per core, and its ratio to the first setting's.
//
//   distml_actor_throughput [ENV] [COPIES] [UNROLL] [ROUNDS] [WORKERS...]
//   e.g. distml_actor_throughput cartpole 8 128 15 1 2
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "distml/rl/envs/vector_env.h"
#include "distml/rl/normalizer.h"
#include "distml/rl/policy.h"
#include "distml/rl/rollout.h"

using namespace distml::rl;

namespace {

struct Actor {
  VectorEnv envs;
  ActorCritic net;
  Normalizer normalizer;
  ActionSampler sampler{1};

  Actor(const std::string& env, int copies, int workers)
      : envs(env, copies, 1, {}, workers),
        net(envs.observation_space(), envs.action_space(), NetworkOptions{}),
        // Continuous control normalises, as distml's defaults do there.
        normalizer(NormalizeConfig{.observations = !envs.action_space().is_discrete(),
                                   .rewards = !envs.action_space().is_discrete()},
                   envs.observation_size(), copies, 0.99) {}
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const std::string env = argc > 1 ? argv[1] : "cartpole";
  const int copies = argc > 2 ? std::stoi(argv[2]) : 8;
  const int unroll = argc > 3 ? std::stoi(argv[3]) : 128;
  const int rounds = argc > 4 ? std::stoi(argv[4]) : 15;
  std::vector<int> settings;
  for (int i = 5; i < argc; ++i) settings.push_back(std::stoi(argv[i]));
  if (settings.empty()) settings = {1, 2};
  torch::set_num_threads(1);  // as distml rl runs by default (run.threads = 1)

  std::vector<std::unique_ptr<Actor>> actors;  // a VectorEnv stays where its workers saw it
  for (int w : settings) {
    Actor& a = *actors.emplace_back(std::make_unique<Actor>(env, copies, w));
    collect_rollout(*a.net, a.envs, a.normalizer, a.sampler, unroll, 0.99);  // warm-up
  }
  std::vector<std::vector<double>> rates(settings.size());
  for (int round = 0; round < rounds; ++round) {
    for (std::size_t s = 0; s < settings.size(); ++s) {
      Actor& a = *actors[s];
      const auto start = std::chrono::steady_clock::now();
      collect_rollout(*a.net, a.envs, a.normalizer, a.sampler, unroll, 0.99);
      const double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      rates[s].push_back(static_cast<double>(unroll) * copies / seconds);
    }
  }
  const int hardware = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  for (std::size_t s = 0; s < settings.size(); ++s) {
    // The actor's thread, plus its workers when there are several, on the cores there are.
    const int cores = std::min(hardware, 1 + (settings[s] > 1 ? settings[s] : 0));
    std::printf(
        "{\"env\": \"%s\", \"copies\": %d, \"unroll\": %d, \"rounds\": %d, \"env_workers\": %d, "
        "\"env_steps_per_sec\": %.0f, \"cores\": %d, \"env_steps_per_sec_per_core\": %.0f, "
        "\"ratio_to_first\": %.3f}\n",
        env.c_str(), copies, unroll, rounds, settings[s], median(rates[s]), cores,
        median(rates[s]) / cores, median(rates[s]) / median(rates[0]));
  }
  return 0;
}
