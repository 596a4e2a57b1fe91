// The humanoid locomotion task of the DPPO paper, as Gymnasium's Humanoid-v4 defines it, simulated
// by MuJoCo 2.2.2 on Debian's sample model (libmujoco-samples' humanoid/humanoid.xml) rather than
// Gymnasium's own humanoid.xml, so a run needs no Python and no model files of our own.
//
// Reward and termination are Humanoid-v4's: reward = 1.25 * (x-velocity of the centre of mass)
// + 5 (alive bonus; with termination on, v4 pays it on every step, the ending one included)
// - 0.1 * |ctrl|^2, where ctrl is the action as given: like Gymnasium, the action goes into
// MuJoCo's ctrl unclipped (MuJoCo clamps it to the control range when it applies it) and the
// cost is charged on it, so an out-of-range action moves the body like the clipped one and
// costs more (an agent that wants the clipped cost clips its actions, as CleanRL's ClipAction
// and distml's actors do); terminated when the torso height qpos[2] leaves (1.0, 2.0); truncated
// after 1000 steps; one step lasts 0.015 s of simulated time, as in Humanoid-v4; reset adds
// uniform(-0.01, 0.01) noise to qpos0 and to the zero velocity. The observation is v4's: qpos[2:],
// qvel, cinert, cvel, qfrc_actuator and cfrc_ext, with cinert, cvel and cfrc_ext over every body,
// the world included.
//
// What the Debian model changes, and why the task still means the same:
//   - 21 actuators in [-1, 1], ankles included (Gymnasium: 17 in [-0.4, 0.4] with 2.5x the gear,
//     so the legs' largest torques agree), 16 bodies and 27 dofs (Gymnasium: 13 and 23): the
//     observation has 454 floats instead of 376, and the largest ctrl cost is 2.1, not 0.27.
//   - timestep 0.005 s, Euler integrator (Gymnasium: 0.003 s, RK4). A step is 3 MuJoCo steps
//     (Gymnasium: 5), so that it lasts 0.015 s as in Humanoid-v4: the alive bonus is then paid per
//     0.015 s alive, an episode lasts up to 15 s, and a return means the same time standing. (With
//     5 steps of 0.005 s a step would last 0.025 s and a return of 600 would take 1.7 times as
//     long on one's feet as Gymnasium's.)
//   - the torso starts at 1.5 m (Gymnasium: 1.4 m), but with feet 0.2 m above the floor instead
//     of 0.1 m: both land standing at about 1.3 m (this one at 1.28 m), so v4's healthy range
//     (1.0, 2.0) keeps its meaning and is used unchanged; an unpowered humanoid slumps below 1.0 m
//     within 1 s.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "distml/rl/envs/env.h"

struct mjModel_;
struct mjData_;

namespace distml::rl {

class Humanoid : public Env {
 public:
  static constexpr int kFrameSkip = 3;  // x 0.005 s = Humanoid-v4's 0.015 s
  static constexpr int kMaxSteps = 1000;
  static constexpr double kForwardRewardWeight = 1.25;
  static constexpr double kHealthyReward = 5.0;
  static constexpr double kCtrlCostWeight = 0.1;
  static constexpr double kHealthyZMin = 1.0, kHealthyZMax = 2.0;
  static constexpr double kResetNoise = 0.01;

  /// Loads model_path() (once per process and path; copies share the read-only model);
  /// ConfigError naming the path and MuJoCo's message if it cannot be loaded.
  Humanoid();
  ~Humanoid() override;
  Humanoid(Humanoid&&) noexcept;
  Humanoid& operator=(Humanoid&&) noexcept;

  /// $DISTML_HUMANOID_XML if set, else the sample model that CMake found at build time.
  static std::string model_path();

  std::string_view name() const override { return "humanoid"; }
  const Space& observation_space() const override { return observation_space_; }
  const Space& action_space() const override { return action_space_; }
  std::vector<float> reset(std::uint64_t seed) override;
  /// Throws Error on a wrong action size or once the episode has ended (reset() first).
  StepResult step(std::span<const float> action) override;
  /// Starts an episode from this state (Gymnasium's set_state): qpos (nq values) and qvel (nv),
  /// for tests. Error on wrong sizes.
  void set_state(std::span<const double> qpos, std::span<const double> qvel);

  /// Seconds of simulated time per step: the model's timestep times kFrameSkip.
  double dt() const;
  /// The x of the mass-weighted mean of the bodies' centres (Gymnasium's mass_center).
  double mass_center_x() const;
  /// The torso's height, qpos[2], which decides termination.
  double torso_height() const;

 private:
  struct DataDeleter {
    void operator()(mjData_* data) const;
  };

  std::vector<float> observe() const;
  std::vector<float> start_episode();  // after the state is set: forces, counters, observation

  std::shared_ptr<const mjModel_> model_;
  std::unique_ptr<mjData_, DataDeleter> data_;
  Space observation_space_, action_space_;
  double total_mass_ = 0;
  int steps_ = 0;
  bool episode_over_ = true;  // until the first reset
};

}  // namespace distml::rl
