// Gymnasium's classic control tasks (CartPole-v1, Acrobot-v1, MountainCar-v0,
// MountainCarContinuous-v0, Pendulum-v1) with Gymnasium's constants, rewards and time limits.
// The state is integrated in double precision and observed as floats.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "distml/rl/envs/env.h"

namespace distml::rl {

/// What the five tasks share: the time limit, a start drawn from the seed alone, and the checks
/// on actions and on stepping an episode that has not begun or has ended. A subclass supplies
/// only the dynamics and the observation.
class ClassicControlEnv : public Env {
 public:
  std::string_view name() const final { return name_; }
  const Space& observation_space() const final { return observation_space_; }
  const Space& action_space() const final { return action_space_; }
  std::vector<float> reset(std::uint64_t seed) final;
  StepResult step(std::span<const float> action) final;

  /// For tests and replays: starts an episode from `state` (laid out as the class comment says)
  /// instead of a drawn one.
  void set_state(std::span<const double> state);
  /// The physical state in double precision, laid out as the class comment says.
  const std::vector<double>& state() const { return state_; }
  /// Gymnasium's max_episode_steps: the step that reaches it is truncated.
  int max_episode_steps() const { return max_episode_steps_; }

 protected:
  struct Outcome {
    double reward = 0;
    bool terminated = false;
  };
  /// Start states are uniform in [start_low[i], start_high[i]] per state dimension.
  ClassicControlEnv(std::string name, Space observation_space, Space action_space,
                    std::vector<double> start_low, std::vector<double> start_high,
                    int max_episode_steps);

  /// Advances `state` one step under `action`, already checked against the action space (a
  /// discrete action is an integral index in range; a box action may still be out of bounds).
  virtual Outcome advance(std::span<double> state, std::span<const float> action) const = 0;
  virtual std::vector<float> observe(std::span<const double> state) const = 0;

 private:
  void check_action(std::span<const float> action) const;

  std::string name_;
  Space observation_space_, action_space_;
  std::vector<double> start_low_, start_high_;
  int max_episode_steps_;
  std::vector<double> state_;
  int steps_ = 0;         // steps taken in the current episode
  bool started_ = false;  // reset() or set_state() has been called
  bool ended_ = false;    // the current episode was terminated or truncated
};

/// CartPole-v1. State [x, x_dot, theta, theta_dot], observed as is. Action 0 pushes the cart
/// left, 1 right. Reward 1 every step, including the one on which the pole falls.
class CartPole final : public ClassicControlEnv {
 public:
  CartPole();

 private:
  Outcome advance(std::span<double> state, std::span<const float> action) const override;
  std::vector<float> observe(std::span<const double> state) const override;
};

/// Acrobot-v1 with the book dynamics. State [theta1, theta2, dtheta1, dtheta2], observed as
/// [cos t1, sin t1, cos t2, sin t2, dt1, dt2]. Actions 0, 1, 2 apply torque -1, 0, +1.
class Acrobot final : public ClassicControlEnv {
 public:
  Acrobot();

 private:
  Outcome advance(std::span<double> state, std::span<const float> action) const override;
  std::vector<float> observe(std::span<const double> state) const override;
};

/// MountainCar-v0. State [position, velocity], observed as is. Actions 0, 1, 2 push left, not at
/// all, right. Reward -1 every step.
class MountainCar final : public ClassicControlEnv {
 public:
  MountainCar();

 private:
  Outcome advance(std::span<double> state, std::span<const float> action) const override;
  std::vector<float> observe(std::span<const double> state) const override;
};

/// MountainCarContinuous-v0. State [position, velocity], observed as is. The action is a force
/// in [-1, 1]; reward -0.1 * action^2 per step and +100 on reaching the goal.
class MountainCarContinuous final : public ClassicControlEnv {
 public:
  MountainCarContinuous();

 private:
  Outcome advance(std::span<double> state, std::span<const float> action) const override;
  std::vector<float> observe(std::span<const double> state) const override;
};

/// Pendulum-v1. State [theta, theta_dot] (theta 0 is upright), observed as
/// [cos theta, sin theta, theta_dot]. The action is a torque in [-2, 2]; never terminates.
class Pendulum final : public ClassicControlEnv {
 public:
  Pendulum();

 private:
  Outcome advance(std::span<double> state, std::span<const float> action) const override;
  std::vector<float> observe(std::span<const double> state) const override;
};

}  // namespace distml::rl
