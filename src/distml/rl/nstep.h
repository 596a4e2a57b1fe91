// Turns one env copy's stream of steps into the n-step transitions Ape-X actors send to replay:
// (s_t, a_t, R_t^(n), gamma^n or 0, s_{t+n}), cut short at episode ends.
#pragma once

#include <deque>
#include <span>
#include <vector>

namespace distml::rl {

/// One n-step transition: the target is reward + discount * max_a Q(next_observation, a).
struct Transition {
  std::vector<float> observation, action;
  float reward = 0;    // sum_{k<m} gamma^k r_{t+k}
  float discount = 0;  // gamma^m, or 0 when the episode terminated inside the window
  std::vector<float> next_observation;
};

/// Turns one env copy's stream of steps into n-step transitions (s_t, a_t, R_t^(n), gamma^n-or-0,
/// s_{t+n}); one window per env copy, fed in step order.
class NStepWindow {
 public:
  NStepWindow(int n, double gamma);

  /// Adds step t: the observation it acted on, the action, its reward, whether the episode
  /// terminated (no bootstrap) or ended at all (terminated or truncated; terminated implies
  /// ended), and the observation after it (for a truncated episode, the final observation).
  /// Appends to `out` the transitions now complete: the one that started n steps back, or, at an
  /// episode end, every pending one (with discount 0 if terminated, gamma^m to the final
  /// observation if truncated).
  void add(std::span<const float> observation, std::span<const float> action, float reward,
           bool terminated, bool ended, std::span<const float> next_observation,
           std::vector<Transition>& out);

  /// Steps added but not yet emitted (fewer than n, all of the current episode).
  std::size_t pending() const { return pending_.size(); }

 private:
  struct Step {
    std::vector<float> observation, action;
    float reward;
  };

  // Emits the transition starting at the oldest pending step over every pending step, then
  // drops that step.
  void emit_front(bool terminated, std::span<const float> next_observation,
                  std::vector<Transition>& out);

  int n_;
  double gamma_;
  std::deque<Step> pending_;
};

}  // namespace distml::rl
