#include "distml/rl/prioritized_replay.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

#include "distml/core/error.h"

namespace distml::rl {
namespace {

std::uint64_t splitmix64(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

void check_priority(const char* what, double priority) {
  if (!(priority >= 0) || std::isinf(priority)) {
    throw Error(cat(what, ": priority must be finite and >= 0, got ", priority));
  }
}

}  // namespace

PrioritizedReplay::PrioritizedReplay(std::size_t capacity, int observation_size, int action_size,
                                     double alpha, std::uint64_t seed)
    : capacity_(capacity),
      observation_size_(observation_size),
      action_size_(action_size),
      alpha_(alpha),
      slot_index_(capacity),
      observations_(capacity * std::max(observation_size, 0)),
      actions_(capacity * std::max(action_size, 0)),
      rewards_(capacity),
      discounts_(capacity),
      next_observations_(capacity * std::max(observation_size, 0)),
      sums_(std::max<std::size_t>(capacity, 1)),
      mins_(std::max<std::size_t>(capacity, 1)) {
  if (capacity == 0) throw Error("PrioritizedReplay: capacity must be at least 1");
  if (observation_size < 1 || action_size < 0) {
    throw Error(cat("PrioritizedReplay: observation_size must be >= 1 and action_size >= 0, got ",
                    observation_size, " and ", action_size));
  }
  if (!(alpha >= 0) || std::isinf(alpha)) {
    throw Error(cat("PrioritizedReplay: alpha must be finite and >= 0, got ", alpha));
  }
  for (auto& word : rng_) word = splitmix64(seed);
}

void PrioritizedReplay::add(const Transition& t, double priority) {
  if (t.observation.size() != static_cast<std::size_t>(observation_size_) ||
      t.next_observation.size() != static_cast<std::size_t>(observation_size_) ||
      t.action.size() != static_cast<std::size_t>(action_size_)) {
    throw Error(cat("PrioritizedReplay::add: transition has observation ", t.observation.size(),
                    ", next_observation ", t.next_observation.size(), " and action ",
                    t.action.size(), " floats; the buffer holds ", observation_size_, ", ",
                    observation_size_, " and ", action_size_));
  }
  check_priority("PrioritizedReplay::add", priority);
  const std::size_t slot = next_index_ % capacity_;
  std::copy(t.observation.begin(), t.observation.end(),
            observations_.begin() + slot * observation_size_);
  std::copy(t.action.begin(), t.action.end(), actions_.begin() + slot * action_size_);
  rewards_[slot] = t.reward;
  discounts_[slot] = t.discount;
  std::copy(t.next_observation.begin(), t.next_observation.end(),
            next_observations_.begin() + slot * observation_size_);
  slot_index_[slot] = next_index_++;
  size_ = std::min(size_ + 1, capacity_);
  set_priority(slot, priority);
}

PrioritizedReplay::Batch PrioritizedReplay::sample(std::size_t batch_size, double beta) {
  if (size_ == 0) throw Error("PrioritizedReplay::sample: the buffer is empty");
  if (batch_size == 0) throw Error("PrioritizedReplay::sample: batch_size must be at least 1");
  Batch batch;
  batch.indices.reserve(batch_size);
  batch.weights.reserve(batch_size);
  batch.observations.reserve(batch_size * observation_size_);
  batch.actions.reserve(batch_size * action_size_);
  batch.rewards.reserve(batch_size);
  batch.discounts.reserve(batch_size);
  batch.next_observations.reserve(batch_size * observation_size_);
  const double total = sums_.total();
  const double segment = total / static_cast<double>(batch_size);
  // max_j (N P(j))^-beta is reached at the smallest priority, and the N and the total cancel:
  // w_i / max_j w_j = (p_min / p_i)^beta.
  const double min_priority = mins_.min();
  for (std::size_t k = 0; k < batch_size; ++k) {
    const double mass = (static_cast<double>(k) + next_uniform()) * segment;
    const std::size_t slot = sums_.find(mass);
    batch.indices.push_back(slot_index_[slot]);
    batch.weights.push_back(static_cast<float>(std::pow(min_priority / sums_.get(slot), beta)));
    const auto obs = observations_.begin() + slot * observation_size_;
    batch.observations.insert(batch.observations.end(), obs, obs + observation_size_);
    const auto act = actions_.begin() + slot * action_size_;
    batch.actions.insert(batch.actions.end(), act, act + action_size_);
    batch.rewards.push_back(rewards_[slot]);
    batch.discounts.push_back(discounts_[slot]);
    const auto next = next_observations_.begin() + slot * observation_size_;
    batch.next_observations.insert(batch.next_observations.end(), next, next + observation_size_);
  }
  return batch;
}

void PrioritizedReplay::update_priorities(std::span<const std::uint64_t> indices,
                                          std::span<const float> priorities) {
  if (indices.size() != priorities.size()) {
    throw Error(cat("PrioritizedReplay::update_priorities: ", indices.size(), " indices but ",
                    priorities.size(), " priorities"));
  }
  for (std::size_t k = 0; k < indices.size(); ++k) {
    check_priority("PrioritizedReplay::update_priorities", priorities[k]);
    const std::size_t slot = indices[k] % capacity_;
    if (indices[k] >= next_index_) {
      throw Error(cat("PrioritizedReplay::update_priorities: index ", indices[k],
                      " was never handed out (", next_index_, " added so far)"));
    }
    if (slot_index_[slot] != indices[k]) continue;  // overwritten since it was sampled
    set_priority(slot, priorities[k]);
  }
}

void PrioritizedReplay::set_priority(std::size_t slot, double priority) {
  const double p = std::pow(std::max(priority, kMinPriority), alpha_);
  sums_.set(slot, p);
  mins_.set(slot, p);
}

double PrioritizedReplay::next_uniform() {
  // xoshiro256** (Blackman and Vigna); the top 53 bits make a double in [0, 1).
  const std::uint64_t result = std::rotl(rng_[1] * 5, 7) * 9;
  const std::uint64_t t = rng_[1] << 17;
  rng_[2] ^= rng_[0];
  rng_[3] ^= rng_[1];
  rng_[1] ^= rng_[2];
  rng_[0] ^= rng_[3];
  rng_[2] ^= t;
  rng_[3] = std::rotl(rng_[3], 45);
  return static_cast<double>(result >> 11) * 0x1.0p-53;
}

}  // namespace distml::rl
