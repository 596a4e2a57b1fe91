#include "distml/rl/envs/vector_env.h"

#include <algorithm>
#include <thread_pool/thread_pool.hpp>
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
                     const EnvOptions& options, int workers)
    : seed_(seed) {
  if (copies < 1) throw ConfigError(cat("VectorEnv needs at least one copy, got ", copies));
  if (workers < 1) throw ConfigError(cat("VectorEnv needs at least one worker, got ", workers));
  for (int c = 0; c < copies; ++c) envs_.push_back(make_env(name, options));
  episodes_.assign(copies, 0);
  running_return_.assign(copies, 0.0);
  running_length_.assign(copies, 0);
  ended_return_.assign(copies, 0.0);
  ended_length_.assign(copies, 0);
  observations_.assign(static_cast<std::size_t>(copies) * observation_size(), 0.0f);
  actions_.assign(static_cast<std::size_t>(copies) * action_space().size(), 0.0f);
  step_.rewards.assign(copies, 0.0f);
  step_.terminated.assign(copies, 0);
  step_.truncated.assign(copies, 0);
  step_.final_observations.assign(observations_.size(), 0.0f);
  for (int c = 0; c < copies; ++c) reset_copy(c);
  in_flight_.resize(workers > 1 && copies > 1 ? 2 : 1);
  if (workers > 1) workers_ = std::make_unique<thread_pool::ThreadPool>(workers);
}

VectorEnv::~VectorEnv() = default;

VectorEnv::Group VectorEnv::group(int g) const {
  DML_CHECK(g >= 0 && g < groups(), "no such group of copies");
  const int first = copies() * g / groups();
  return {first, copies() * (g + 1) / groups() - first};
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
  const std::size_t action_size = action_space().size();
  if (actions.size() != static_cast<std::size_t>(copies()) * action_size)
    throw Error(cat("VectorEnv(", envs_[0]->name(), "): got ", actions.size(), " action values, ",
                    "expected ", copies(), " copies x ", action_size));
  for (int g = 0; g < groups(); ++g) {
    const Group grp = group(g);
    start_step(g, actions.subspan(grp.first * action_size, grp.count * action_size));
  }
  for (int g = 0; g < groups(); ++g) finish_step(g);
  return step_;
}

void VectorEnv::start_step(int g, std::span<const float> actions) {
  const Group grp = group(g);
  const std::size_t action_size = action_space().size();
  if (actions.size() != static_cast<std::size_t>(grp.count) * action_size)
    throw Error(cat("VectorEnv(", envs_[0]->name(), "): got ", actions.size(),
                    " action values for group ", g, ", expected ", grp.count, " copies x ",
                    action_size));
  DML_CHECK(in_flight_[g].empty(), "a group of copies started stepping twice");
  std::copy(actions.begin(), actions.end(), actions_.begin() + grp.first * action_size);
  if (!workers_) {
    for (int c = grp.first; c < grp.first + grp.count; ++c) step_copy(c);
    return;
  }
  // One task per worker, each a contiguous run of the group's copies.
  const int tasks = std::min(static_cast<int>(workers_->num_threads()), grp.count);
  for (int i = 0; i < tasks; ++i) {
    const int begin = grp.first + grp.count * i / tasks;
    const int end = grp.first + grp.count * (i + 1) / tasks;
    in_flight_[g].push_back(workers_->Submit([this, begin, end] {
      for (int c = begin; c < end; ++c) step_copy(c);
    }));
  }
}

void VectorEnv::drain() {
  for (auto& tasks : in_flight_) {
    for (std::future<void>& task : tasks) task.wait();
    tasks.clear();
  }
}

const VectorEnv::Step& VectorEnv::finish_step(int g) {
  const Group grp = group(g);
  std::exception_ptr failure;
  for (std::future<void>& task : in_flight_[g]) {
    try {
      task.get();
    } catch (...) {
      if (!failure) failure = std::current_exception();  // the lowest copy's
    }
  }
  in_flight_[g].clear();
  if (failure) {
    drain();  // no worker may touch the copies once the error is out
    std::rethrow_exception(failure);
  }
  for (int c = grp.first; c < grp.first + grp.count; ++c) {
    ++steps_;
    if (step_.terminated[c] || step_.truncated[c]) {
      finished_.returns.push_back(ended_return_[c]);
      finished_.lengths.push_back(ended_length_[c]);
    }
  }
  return step_;
}

void VectorEnv::step_copy(int c) {
  const int action_size = action_space().size();
  const int obs_size = observation_size();
  StepResult r;
  try {
    r = envs_[c]->step(std::span<const float>(actions_).subspan(c * action_size, action_size));
    check_observation(r.observation);
  } catch (const std::exception& e) {
    throw env_failure(envs_[c]->name(), where(c, cat("step ", running_length_[c] + 1).c_str()), e);
  }
  running_return_[c] += r.reward;
  ++running_length_[c];
  step_.rewards[c] = static_cast<float>(r.reward);
  step_.terminated[c] = r.terminated;
  step_.truncated[c] = r.truncated;
  std::copy(r.observation.begin(), r.observation.end(),
            step_.final_observations.begin() + c * obs_size);
  if (r.terminated || r.truncated) {
    ended_return_[c] = running_return_[c];
    ended_length_[c] = running_length_[c];
    reset_copy(c);
  } else {
    std::copy(r.observation.begin(), r.observation.end(), observations_.begin() + c * obs_size);
  }
}

VectorEnv::Finished VectorEnv::take_finished() { return std::exchange(finished_, {}); }

}  // namespace distml::rl
