// The humanoid environment against the Humanoid-v4 definitions: its spaces, determinism under a
// seed, the first-step reward recomputed from the centre of mass, falling, and misuse.
#include "distml/rl/envs/humanoid.h"

#include <gtest/gtest.h>
#include <mujoco/mujoco.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "distml/core/error.h"

namespace distml::rl {
namespace {

std::vector<float> random_action(const Space& space, std::mt19937& gen) {
  std::vector<float> action(space.size());
  for (int i = 0; i < space.size(); ++i)
    action[i] = std::uniform_real_distribution<float>(space.low[i], space.high[i])(gen);
  return action;
}

TEST(Humanoid, SpacesFollowTheModel) {
  Humanoid env;
  EXPECT_EQ(env.name(), "humanoid");
  // Debian's model: nq 28, nv 27, 17 bodies with the world, 21 motors in [-1, 1].
  const Space& obs = env.observation_space();
  EXPECT_FALSE(obs.is_discrete());
  EXPECT_EQ(obs.size(), 26 + 27 + 10 * 17 + 6 * 17 + 27 + 6 * 17);
  EXPECT_EQ(obs.size(), 454);
  EXPECT_EQ(static_cast<int>(env.reset(0).size()), obs.size());
  const Space& act = env.action_space();
  EXPECT_FALSE(act.is_discrete());
  ASSERT_EQ(act.size(), 21);
  for (int i = 0; i < act.size(); ++i) {
    EXPECT_EQ(act.low[i], -1.0f);
    EXPECT_EQ(act.high[i], 1.0f);
  }
  EXPECT_DOUBLE_EQ(env.dt(), 0.015);  // Humanoid-v4's step
}

TEST(Humanoid, StartsNearTheModelPoseWithTheTorsoAtOnePointFive) {
  Humanoid env;
  const std::vector<float> obs = env.reset(7);
  EXPECT_NEAR(env.torso_height(), 1.5, Humanoid::kResetNoise);
  EXPECT_NEAR(obs[0], 1.5, Humanoid::kResetNoise);  // qpos[2] leads the observation
}

TEST(Humanoid, EqualSeedsAndActionsGiveEqualEpisodes) {
  Humanoid a, b;
  std::vector<float> obs_a = a.reset(42), obs_b = b.reset(42);
  ASSERT_EQ(obs_a, obs_b);
  std::mt19937 gen(3);
  for (int t = 0; t < 50; ++t) {
    const std::vector<float> action = random_action(a.action_space(), gen);
    const StepResult ra = a.step(action), rb = b.step(action);
    ASSERT_EQ(ra.observation, rb.observation) << "step " << t;
    ASSERT_EQ(ra.reward, rb.reward) << "step " << t;
    ASSERT_EQ(ra.terminated, rb.terminated);
    if (ra.terminated) break;
  }
  Humanoid c;
  EXPECT_NE(c.reset(43), a.reset(42));
  EXPECT_EQ(a.reset(42), obs_a);  // a reset forgets the previous episode
}

TEST(Humanoid, FirstStepRewardIsForwardVelocityPlusAliveBonus) {
  Humanoid env;
  env.reset(5);
  const std::vector<float> zero(env.action_space().size(), 0.0f);
  const double x_before = env.mass_center_x();
  const StepResult r = env.step(zero);
  const double x_after = env.mass_center_x();
  ASSERT_FALSE(r.terminated);
  EXPECT_NE(x_after, x_before);  // the reset noise sets it moving
  // The same double formula; the env's dt is 3 x 0.005, which may differ from 0.015 in the last
  // bit: a relative 1e-16 of a reward of order 10, far inside 1e-9.
  EXPECT_NEAR(r.reward, 1.25 * (x_after - x_before) / 0.015 + 5.0, 1e-9);
}

// Humanoid-v4's step written out with MuJoCo's own calls, as Gymnasium's humanoid_v4.py and
// mujoco_env.py do it (with a step of 0.015 s: 3 x 0.005 s here): ctrl = action as given,
// 3 x mj_step, mj_rnePostConstraint; the mass
// centre is sum(body_mass * xipos) / sum(body_mass); reward = 1.25 * dx / dt + 5
// - 0.1 * sum(ctrl^2).
struct GymnasiumHumanoid {
  mjModel* model;
  mjData* data;
  GymnasiumHumanoid() {
    char error[512] = "";
    model = mj_loadXML(Humanoid::model_path().c_str(), nullptr, error, sizeof error);
    data = mj_makeData(model);
  }
  ~GymnasiumHumanoid() {
    mj_deleteData(data);
    mj_deleteModel(model);
  }
  double mass_center_x() const {
    double weighted = 0, mass = 0;
    for (int b = 0; b < model->nbody; ++b) {
      weighted += model->body_mass[b] * data->xipos[3 * b];
      mass += model->body_mass[b];
    }
    return weighted / mass;
  }
  void set_state(const std::vector<double>& qpos, const std::vector<double>& qvel) {
    mj_resetData(model, data);
    std::copy(qpos.begin(), qpos.end(), data->qpos);
    std::copy(qvel.begin(), qvel.end(), data->qvel);
    mj_forward(model, data);
  }
  double step(const std::vector<float>& action) {
    const double before = mass_center_x();
    for (int i = 0; i < model->nu; ++i) data->ctrl[i] = action[i];
    for (int k = 0; k < 3; ++k) mj_step(model, data);
    mj_rnePostConstraint(model, data);
    double ctrl = 0;
    for (int i = 0; i < model->nu; ++i) ctrl += data->ctrl[i] * data->ctrl[i];
    const double dt = 0.015;  // Humanoid-v4's step
    return 1.25 * (mass_center_x() - before) / dt + 5.0 - 0.1 * ctrl;
  }
};

// Hand-set states (a crouch, a lean with spin, a fast forward push) and actions inside and
// outside [-1, 1]: distml's reward equals the formula. Both run the same MuJoCo calls on the same
// model, so they agree to the last bits; 1e-12 allows for a different summation order only.
TEST(Humanoid, RewardEqualsGymnasiumsFormulaOnHandSetStatesWithOutOfRangeActions) {
  GymnasiumHumanoid gym;
  const int nq = gym.model->nq, nv = gym.model->nv, nu = gym.model->nu;
  std::vector<std::vector<double>> qpos(
      3, std::vector<double>(gym.model->qpos0, gym.model->qpos0 + nq));
  std::vector<std::vector<double>> qvel(3, std::vector<double>(nv, 0.0));
  qpos[0][2] = 1.2;                     // crouched
  qpos[1][3] = 0.98, qpos[1][4] = 0.2;  // leaning (quaternion w, x; MuJoCo normalises)
  qvel[1][5] = 1.5;                     // spinning about z
  qvel[2][0] = 2.0;                     // pushed forward
  for (int j = 6; j < nv; ++j) qvel[2][j] = 0.3 * ((j % 3) - 1);
  std::vector<std::vector<float>> actions = {
      std::vector<float>(nu, 0.5f), std::vector<float>(nu, 0.0f), std::vector<float>(nu, 0.0f)};
  for (int i = 0; i < nu; ++i) {
    actions[1][i] = (i % 2 ? 3.0f : -2.5f);  // every control far outside its range
    actions[2][i] = (i % 3 == 0 ? 1.7f : -0.4f);
  }
  for (std::size_t s = 0; s < qpos.size(); ++s) {
    Humanoid env;
    env.set_state(qpos[s], qvel[s]);
    gym.set_state(qpos[s], qvel[s]);
    const StepResult r = env.step(actions[s]);
    const double expected = gym.step(actions[s]);
    EXPECT_NEAR(r.reward, expected, 1e-12 * std::abs(expected)) << "state " << s;
  }
}

// The cost is charged on the action as given, while MuJoCo applies the clipped one: 3 moves the
// body exactly like 1 but pays 0.1 x 21 x (9 - 1) = 16.8 more.
TEST(Humanoid, ChargesControlCostOnTheUnclippedActionButMovesAsClipped) {
  Humanoid env, reference;
  env.reset(9);
  reference.reset(9);
  const std::vector<float> beyond(env.action_space().size(), 3.0f);
  const std::vector<float> at_bound(env.action_space().size(), 1.0f);
  const StepResult r = env.step(beyond), ref = reference.step(at_bound);
  EXPECT_EQ(r.observation, ref.observation);
  EXPECT_NEAR(ref.reward - r.reward, 0.1 * 21 * (9 - 1), 1e-9);  // one cost difference, rounded
}

TEST(Humanoid, SetStateRejectsWrongSizes) {
  Humanoid env;
  EXPECT_THROW(env.set_state(std::vector<double>(27), std::vector<double>(27)), Error);
  EXPECT_THROW(env.set_state(std::vector<double>(28), std::vector<double>(26)), Error);
}

TEST(Humanoid, FallsAndTerminatesUnderZeroActions) {
  Humanoid env;
  env.reset(1);
  const std::vector<float> zero(env.action_space().size(), 0.0f);
  StepResult r;
  int steps = 0;
  while (steps < Humanoid::kMaxSteps) {
    r = env.step(zero);
    ++steps;
    if (r.terminated || r.truncated) break;
  }
  EXPECT_TRUE(r.terminated);
  EXPECT_FALSE(r.truncated);
  EXPECT_LE(env.torso_height(), Humanoid::kHealthyZMin);
  EXPECT_LT(steps, 100);  // an unpowered body slumps in about a second (40 steps)
  std::printf("[ humanoid ] fell after %d steps (%.2f s)\n", steps, steps * env.dt());
}

TEST(Humanoid, RejectsAWrongActionSize) {
  Humanoid env;
  env.reset(0);
  const std::vector<float> short_action(20, 0.0f);
  EXPECT_THROW(env.step(short_action), Error);
  try {
    env.step(short_action);
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("humanoid"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("20"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("21"), std::string::npos);
  }
}

TEST(Humanoid, RejectsStepsOutsideAnEpisode) {
  Humanoid env;
  const std::vector<float> zero(env.action_space().size(), 0.0f);
  EXPECT_THROW(env.step(zero), Error);  // before any reset
  env.reset(1);
  StepResult r;
  do r = env.step(zero);
  while (!r.terminated && !r.truncated);
  EXPECT_THROW(env.step(zero), Error);
  env.reset(2);
  EXPECT_NO_THROW(env.step(zero));
}

TEST(Humanoid, AMissingModelIsAConfigErrorNamingThePath) {
  const char* path = "/nonexistent/humanoid.xml";
  ASSERT_EQ(setenv("DISTML_HUMANOID_XML", path, 1), 0);
  try {
    Humanoid env;
    ADD_FAILURE() << "loaded a model from " << path;
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
  unsetenv("DISTML_HUMANOID_XML");
  EXPECT_NO_THROW(Humanoid());
}

// Not a check: prints the speed of one environment under random actions.
TEST(Humanoid, ReportsStepsPerSecond) {
  Humanoid env;
  std::mt19937 gen(11);
  env.reset(0);
  std::uint64_t seed = 1;
  const int steps = 5000;
  const auto start = std::chrono::steady_clock::now();
  for (int t = 0; t < steps; ++t) {
    const StepResult r = env.step(random_action(env.action_space(), gen));
    if (r.terminated || r.truncated) env.reset(seed++);
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("[ humanoid ] %.0f env steps/s (%d steps, %llu resets, random actions)\n",
              steps / seconds, steps, static_cast<unsigned long long>(seed - 1));
}

}  // namespace
}  // namespace distml::rl
