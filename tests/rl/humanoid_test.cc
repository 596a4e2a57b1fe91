// The humanoid environment against the Humanoid-v4 definitions: its spaces, determinism under a
// seed, the first-step reward recomputed from the centre of mass, falling, and misuse.
#include "distml/rl/envs/humanoid.h"

#include <gtest/gtest.h>

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
  EXPECT_DOUBLE_EQ(env.dt(), 0.025);
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
  EXPECT_NEAR(r.reward, 1.25 * (x_after - x_before) / 0.025 + 5.0, 1e-9);
}

TEST(Humanoid, ChargesControlCostOnTheClippedAction) {
  Humanoid env, reference;
  env.reset(9);
  reference.reset(9);
  // 3 clips to the bound 1, so both act alike and pay alike.
  const std::vector<float> beyond(env.action_space().size(), 3.0f);
  const std::vector<float> at_bound(env.action_space().size(), 1.0f);
  const StepResult r = env.step(beyond), ref = reference.step(at_bound);
  EXPECT_EQ(r.observation, ref.observation);
  EXPECT_EQ(r.reward, ref.reward);
  // The cost itself: the saturated action pays 0.1 * 21 * 1^2 = 2.1.
  Humanoid probe;
  probe.reset(9);
  const double before = probe.mass_center_x();
  const StepResult p = probe.step(at_bound);
  EXPECT_NEAR(p.reward, 1.25 * (probe.mass_center_x() - before) / 0.025 + 5.0 - 0.1 * 21, 1e-9);
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
