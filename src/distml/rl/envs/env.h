// The environment interface of distml's reinforcement learning: Gymnasium's reset/step with its
// terminated/truncated split, over two kinds of space (Discrete and Box).
//
// An action is always a span of floats: a Discrete action is one float holding the index, a
// Box action has one float per dimension. Environments clip Box actions to their bounds, as
// the Gymnasium versions do.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace distml::rl {

struct Space {
  enum class Kind { discrete, box };
  Kind kind = Kind::discrete;
  int n = 0;                      // discrete: actions 0..n-1
  std::vector<float> low, high;   // box: per-dimension bounds (size = dimension)

  static Space discrete(int n) { return {Kind::discrete, n, {}, {}}; }
  static Space box(std::vector<float> low, std::vector<float> high) {
    return {Kind::box, 0, std::move(low), std::move(high)};
  }
  bool is_discrete() const { return kind == Kind::discrete; }
  /// Floats in one element of the space: 1 for discrete, the dimension for box.
  int size() const { return is_discrete() ? 1 : static_cast<int>(low.size()); }
};

struct StepResult {
  std::vector<float> observation;
  double reward = 0;
  bool terminated = false;  // the task ended (pole fell, goal reached): no bootstrap
  bool truncated = false;   // the time limit cut the episode: bootstrap from the observation
};

class Env {
 public:
  virtual ~Env() = default;
  virtual std::string_view name() const = 0;
  virtual const Space& observation_space() const = 0;
  virtual const Space& action_space() const = 0;
  /// Starts an episode; the start state is drawn from `seed` alone, so equal seeds give
  /// equal episodes under equal actions.
  virtual std::vector<float> reset(std::uint64_t seed) = 0;
  /// Advances one step. `action.size()` must equal action_space().size().
  virtual StepResult step(std::span<const float> action) = 0;
};

/// The environment called `name` (cartpole, acrobot, mountaincar, mountaincar_continuous,
/// pendulum, humanoid); ConfigError listing the names otherwise.
std::unique_ptr<Env> make_env(std::string_view name);
/// Every name make_env accepts, in --help order.
const std::vector<std::string>& env_names();

}  // namespace distml::rl
