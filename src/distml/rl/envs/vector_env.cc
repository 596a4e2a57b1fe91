#include "distml/rl/envs/vector_env.h"

#include <algorithm>
#include <utility>

#include "distml/core/error.h"
#include "distml/data/permutation.h"

namespace distml::rl {
namespace {

std::uint64_t episode_seed(std::uint64_t seed, int copy, std::uint64_t episode) {
  using data::splitmix64;
  return splitmix64(splitmix64(splitmix64(seed) ^ static_cast<std::uint64_t>(copy)) ^ episode);
}

}  // namespace

VectorEnv::VectorEnv(std::string_view name, int copies, std::uint64_t seed,
                     const EnvOptions& options)
    : seed_(seed) {
  if (copies < 1) throw ConfigError(cat("VectorEnv needs at least one copy, got ", copies));
  for (int c = 0; c < copies; ++c) envs_.push_back(make_env(name, options));
  episodes_.assign(copies, 0);
  running_return_.assign(copies, 0.0);
  running_length_.assign(copies, 0);
  observations_.assign(static_cast<std::size_t>(copies) * observation_size(), 0.0f);
  step_.rewards.assign(copies, 0.0f);
  step_.terminated.assign(copies, 0);
  step_.truncated.assign(copies, 0);
  step_.final_observations.assign(observations_.size(), 0.0f);
  for (int c = 0; c < copies; ++c) reset_copy(c);
}

void VectorEnv::check_observation(const std::vector<float>& observation) const {
  if (static_cast<int>(observation.size()) != observation_size())
    throw EnvError(
        cat("an observation of ", observation.size(), " floats, expected ", observation_size()));
}

std::string VectorEnv::where(int c, const char* what) const {
  return cat("copy ", c, ", ", what, " of episode ", episodes_[c]);
}

void VectorEnv::reset_copy(int c) {
  std::vector<float> first;
  try {
    first = envs_[c]->reset(episode_seed(seed_, c, episodes_[c]++));
    check_observation(first);
  } catch (const std::exception& e) {
    throw env_failure(envs_[c]->name(), where(c, "the reset"), e);
  }
  std::copy(first.begin(), first.end(), observations_.begin() + c * observation_size());
  running_return_[c] = 0;
  running_length_[c] = 0;
}

const VectorEnv::Step& VectorEnv::step(std::span<const float> actions) {
  const int action_size = action_space().size();
  const int obs_size = observation_size();
  if (actions.size() != static_cast<std::size_t>(copies()) * action_size)
    throw Error(cat("VectorEnv(", envs_[0]->name(), "): got ", actions.size(), " action values, ",
                    "expected ", copies(), " copies x ", action_size));
  for (int c = 0; c < copies(); ++c) {
    StepResult r;
    try {
      r = envs_[c]->step(actions.subspan(c * action_size, action_size));
      check_observation(r.observation);
    } catch (const std::exception& e) {
      throw env_failure(envs_[c]->name(), where(c, cat("step ", running_length_[c] + 1).c_str()),
                        e);
    }
    ++steps_;
    running_return_[c] += r.reward;
    ++running_length_[c];
    step_.rewards[c] = static_cast<float>(r.reward);
    step_.terminated[c] = r.terminated;
    step_.truncated[c] = r.truncated;
    std::copy(r.observation.begin(), r.observation.end(),
              step_.final_observations.begin() + c * obs_size);
    if (r.terminated || r.truncated) {
      finished_.returns.push_back(running_return_[c]);
      finished_.lengths.push_back(running_length_[c]);
      reset_copy(c);
    } else {
      std::copy(r.observation.begin(), r.observation.end(), observations_.begin() + c * obs_size);
    }
  }
  return step_;
}

VectorEnv::Finished VectorEnv::take_finished() { return std::exchange(finished_, {}); }

}  // namespace distml::rl
