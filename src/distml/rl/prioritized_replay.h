// Proportional prioritized replay of Schaul et al. 2016 as Ape-X uses it: a ring buffer of
// n-step transitions drawn with probability p_i^alpha / sum_j p_j^alpha, stratified over the
// batch, with importance weights normalised by the largest weight in the buffer.
//
// Indices handed out by sample() are insertion sequence numbers: the k-th transition ever added
// has index k and lives in slot k % capacity. A slot remembers the index it holds, so
// update_priorities() ignores an index whose slot was overwritten after it was sampled (the
// learner's priorities arrive late, while actors keep inserting).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "distml/rl/nstep.h"
#include "distml/rl/sum_tree.h"

namespace distml::rl {

class PrioritizedReplay {
 public:
  /// Priorities below this (0 included) are stored as this, so every transition can be drawn.
  static constexpr double kMinPriority = 1e-6;

  struct Batch {
    std::vector<std::uint64_t> indices;  // insertion sequence numbers, for update_priorities
    std::vector<float> weights;          // importance weights in (0, 1]
    std::vector<float> observations;     // [batch, observation_size]
    std::vector<float> actions;          // [batch, action_size]
    std::vector<float> rewards, discounts;
    std::vector<float> next_observations;  // [batch, observation_size]
  };

  /// A buffer of `capacity` transitions; `seed` alone fixes every draw.
  PrioritizedReplay(std::size_t capacity, int observation_size, int action_size, double alpha,
                    std::uint64_t seed);

  /// Adds `t` with `priority` (>= 0), overwriting the oldest transition once full.
  void add(const Transition& t, double priority);
  /// Draws `batch_size` transitions, one from each of batch_size equal slices of the priority
  /// mass, with weights w_i = (N P(i))^-beta / max_j (N P(j))^-beta. Error when empty.
  Batch sample(std::size_t batch_size, double beta);
  /// Sets new priorities of sampled indices; indices whose slot was overwritten are ignored.
  void update_priorities(std::span<const std::uint64_t> indices, std::span<const float> priorities);
  /// Transitions stored (at most capacity).
  std::size_t size() const { return size_; }
  std::size_t capacity() const { return capacity_; }

 private:
  void set_priority(std::size_t slot, double priority);
  double next_uniform();  // in [0, 1)

  std::size_t capacity_;
  int observation_size_, action_size_;
  double alpha_;
  std::uint64_t rng_[4];  // xoshiro256**, the same stream on every standard library
  std::size_t size_ = 0;
  std::uint64_t next_index_ = 0;           // sequence number of the next add
  std::vector<std::uint64_t> slot_index_;  // the sequence number each slot holds
  std::vector<float> observations_, actions_, rewards_, discounts_, next_observations_;
  SumTree sums_;  // p^alpha per slot
  MinTree mins_;  // p^alpha per filled slot, for the largest weight
};

}  // namespace distml::rl
