#include "distml/rl/algos/apex_agent.h"

#include <cmath>

#include "distml/rl/policy.h"

namespace distml::rl {

namespace {

torch::Tensor rows(const std::vector<float>& values, int width) {
  return as_tensor(values, width);
}

}  // namespace

TransitionBatch TransitionBatch::of(const std::vector<Transition>& items,
                                    const apex::Layout& layout) {
  std::vector<float> obs, act, reward, discount, next;
  for (const Transition& t : items) {
    obs.insert(obs.end(), t.observation.begin(), t.observation.end());
    act.insert(act.end(), t.action.begin(), t.action.end());
    reward.push_back(t.reward);
    discount.push_back(t.discount);
    next.insert(next.end(), t.next_observation.begin(), t.next_observation.end());
  }
  return {rows(obs, layout.observation_size), rows(act, layout.action_size),
          torch::tensor(reward), torch::tensor(discount), rows(next, layout.observation_size)};
}

TransitionBatch TransitionBatch::of(const PrioritizedReplay::Batch& b,
                                    const apex::Layout& layout) {
  return {rows(b.observations, layout.observation_size), rows(b.actions, layout.action_size),
          torch::tensor(b.rewards), torch::tensor(b.discounts),
          rows(b.next_observations, layout.observation_size)};
}

double actor_epsilon(const ApexConfig& c, int index, int actors) {
  const double spread = actors > 1 ? c.epsilon_alpha * index / (actors - 1) : 0.0;
  return std::pow(c.epsilon, 1 + spread);
}

double actor_noise(const ApexConfig& c, int index, int actors) {
  const double position = actors > 1 ? static_cast<double>(index) / (actors - 1) : 0.0;
  return c.noise * std::pow(c.noise_min / c.noise, position);
}

std::unique_ptr<ApexActorAgent> make_apex_actor(const RlConfig& config, int index, int actors,
                                                std::uint64_t seed) {
  return config.algo.name == "apex_dpg" ? make_dpg_actor(config, index, actors, seed)
                                        : make_dqn_actor(config, index, actors, seed);
}

std::unique_ptr<ApexLearnerAgent> make_apex_learner(const RlConfig& config) {
  return config.algo.name == "apex_dpg" ? make_dpg_learner(config) : make_dqn_learner(config);
}

}  // namespace distml::rl
