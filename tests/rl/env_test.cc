// The classic control tasks against the published equations, written out again here in their
// own form, and VectorEnv's auto-reset and bookkeeping.
#include "distml/rl/envs/env.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <numbers>
#include <string>
#include <vector>

#include "distml/core/error.h"
#include "distml/rl/envs/classic_control.h"
#include "distml/rl/envs/vector_env.h"

namespace distml::rl {
namespace {

constexpr double kPi = std::numbers::pi;
constexpr double kTolerance = 1e-6;

StepResult step_with(Env& env, float action) {
  const float a[1] = {action};
  return env.step(a);
}

void expect_observation(const std::vector<float>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < want.size(); ++i)
    EXPECT_NEAR(got[i], want[i], kTolerance) << "component " << i;
}

// A varied but fixed action for step i: cycles through a discrete space, sweeps a box.
std::vector<float> action_for(const Space& space, int i) {
  if (space.is_discrete()) return {static_cast<float>(i % space.n)};
  std::vector<float> a;
  for (std::size_t d = 0; d < space.low.size(); ++d)
    a.push_back(space.high[d] * static_cast<float>(std::sin(0.3 * i + d)));
  return a;
}

// --- CartPole ----------------------------------------------------------------------------------

// Florian's cart-pole equations (coneural.org/florian/papers/05_cart_pole.pdf, no friction),
// with one explicit Euler step of 0.02 s.
std::array<double, 4> cartpole_next(const std::array<double, 4>& s, int action) {
  const double g = 9.8, mc = 1.0, mp = 0.1, l = 0.5, tau = 0.02;
  const double f = action == 1 ? 10.0 : -10.0;
  const double th = s[2], w = s[3];
  const double theta_acc =
      (g * std::sin(th) + std::cos(th) * (-f - mp * l * w * w * std::sin(th)) / (mc + mp)) /
      (l * (4.0 / 3.0 - mp * std::cos(th) * std::cos(th) / (mc + mp)));
  const double x_acc = (f + mp * l * (w * w * std::sin(th) - theta_acc * std::cos(th))) / (mc + mp);
  return {s[0] + tau * s[1], s[1] + tau * x_acc, th + tau * w, w + tau * theta_acc};
}

TEST(CartPole, StepsFollowTheEulerEquations) {
  CartPole env;
  std::array<double, 4> s = {0.01, -0.2, 0.03, 0.4};
  env.set_state(s);
  for (int action : {1, 0, 1}) {
    s = cartpole_next(s, action);
    const StepResult r = step_with(env, static_cast<float>(action));
    expect_observation(r.observation, {s[0], s[1], s[2], s[3]});
    EXPECT_EQ(r.reward, 1.0);
    EXPECT_FALSE(r.terminated);
    EXPECT_FALSE(r.truncated);
  }
}

TEST(CartPole, PushingRightTerminatesWithRewardOne) {
  CartPole env;
  env.reset(7);
  int steps = 0;
  StepResult r;
  do {
    r = step_with(env, 1);
    ++steps;
    EXPECT_EQ(r.reward, 1.0);
  } while (!r.terminated && steps < 100);
  EXPECT_TRUE(r.terminated);
  EXPECT_FALSE(r.truncated);
  EXPECT_GE(steps, 5);
  EXPECT_LE(steps, 60);
  const double theta_limit = 12 * 2 * kPi / 360;
  EXPECT_TRUE(std::abs(r.observation[0]) > 2.4 || std::abs(r.observation[2]) > theta_limit);
}

TEST(CartPole, AlternatingActionsEndByStep500) {
  CartPole env;
  env.reset(3);
  for (int t = 1; t <= 500; ++t) {
    const StepResult r = step_with(env, static_cast<float>(t % 2));
    if (t == 500) {
      EXPECT_TRUE(r.terminated || r.truncated);
    }
    if (r.truncated) {
      EXPECT_EQ(t, 500);
    }
    if (r.terminated || r.truncated) break;
  }
}

TEST(CartPole, StartsUniformInASmallBox) {
  CartPole env;
  double low = 1, high = -1;
  for (std::uint64_t seed = 0; seed < 200; ++seed) {
    env.reset(seed);
    for (double v : env.state()) {
      EXPECT_LE(std::abs(v), 0.05);
      low = std::min(low, v);
      high = std::max(high, v);
    }
  }
  EXPECT_LT(low, -0.045);
  EXPECT_GT(high, 0.045);
}

TEST(CartPole, RejectsActionsOutsideDiscreteTwo) {
  CartPole env;
  env.reset(1);
  for (float bad : {2.0f, -1.0f, 0.5f, std::nanf("")}) {
    try {
      step_with(env, bad);
      ADD_FAILURE() << "accepted action " << bad;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("cartpole"), std::string::npos) << e.what();
    }
  }
  try {
    step_with(env, 2);
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("action 2"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(step_with(env, 1));
}

// --- Acrobot -----------------------------------------------------------------------------------

using State4 = std::array<double, 4>;

// Sutton & Barto's acrobot (the book form) with the Gymnasium constants substituted:
// m = l1 = 1, lc = 0.5, I = 1, g = 9.8, so cos(a - pi/2) = sin(a) and the products are numbers.
State4 acrobot_rate(const State4& s, double torque) {
  const double t1 = s[0], t2 = s[1], w1 = s[2], w2 = s[3];
  const double d1 = 3.5 + std::cos(t2);
  const double d2 = 1.25 + 0.5 * std::cos(t2);
  const double phi2 = 4.9 * std::sin(t1 + t2);
  const double phi1 =
      -0.5 * w2 * w2 * std::sin(t2) - w1 * w2 * std::sin(t2) + 14.7 * std::sin(t1) + phi2;
  const double a2 =
      (torque + d2 / d1 * phi1 - 0.5 * w1 * w1 * std::sin(t2) - phi2) / (1.25 - d2 * d2 / d1);
  const double a1 = -(d2 * a2 + phi1) / d1;
  return {w1, w2, a1, a2};
}

// One classical RK4 step of 0.2 s, then Gymnasium's wrap and velocity bounds.
State4 acrobot_next(const State4& s, int action) {
  const double torque = action - 1.0, h = 0.2;
  const auto offset = [&](const State4& k, double f) {
    return State4{s[0] + f * k[0], s[1] + f * k[1], s[2] + f * k[2], s[3] + f * k[3]};
  };
  const State4 k1 = acrobot_rate(s, torque);
  const State4 k2 = acrobot_rate(offset(k1, h / 2), torque);
  const State4 k3 = acrobot_rate(offset(k2, h / 2), torque);
  const State4 k4 = acrobot_rate(offset(k3, h), torque);
  State4 n;
  for (int i = 0; i < 4; ++i) n[i] = s[i] + h / 6 * (k1[i] + 2 * k2[i] + 2 * k3[i] + k4[i]);
  n[0] = std::remainder(n[0], 2 * kPi);
  n[1] = std::remainder(n[1], 2 * kPi);
  n[2] = std::clamp(n[2], -4 * kPi, 4 * kPi);
  n[3] = std::clamp(n[3], -9 * kPi, 9 * kPi);
  return n;
}

std::vector<double> acrobot_observation(const State4& s) {
  return {std::cos(s[0]), std::sin(s[0]), std::cos(s[1]), std::sin(s[1]), s[2], s[3]};
}

TEST(Acrobot, StepsMatchAnIndependentRk4OfTheBookEquations) {
  Acrobot env;
  State4 s = {0.3, -0.2, 0.5, -1.0};
  env.set_state(s);
  for (int action : {2, 0, 1}) {
    s = acrobot_next(s, action);
    const StepResult r = step_with(env, static_cast<float>(action));
    expect_observation(r.observation, acrobot_observation(s));
    EXPECT_EQ(r.reward, -1.0);
    EXPECT_FALSE(r.terminated);
  }
}

TEST(Acrobot, ClipsJointVelocities) {
  Acrobot env;
  const State4 s = {0.5, -1.0, 12.4, 28.0};
  env.set_state(s);
  const StepResult r = step_with(env, 2);
  expect_observation(r.observation, acrobot_observation(acrobot_next(s, 2)));
  EXPECT_LE(std::abs(r.observation[4]), 4 * kPi + 1e-5);
  EXPECT_LE(std::abs(r.observation[5]), 9 * kPi + 1e-5);
}

TEST(Acrobot, SwingingUpWrapsTheAngleAndEndsWithRewardZero) {
  Acrobot env;
  const State4 s = {3.0, 0.0, 4.0, 0.0};  // near the top, turning past pi
  env.set_state(s);
  const StepResult r = step_with(env, 1);
  const State4 n = acrobot_next(s, 1);
  expect_observation(r.observation, acrobot_observation(n));
  EXPECT_GE(env.state()[0], -kPi);
  EXPECT_LE(env.state()[0], kPi);
  EXPECT_LT(env.state()[0], 0);  // it went past pi and came back as a negative angle
  EXPECT_TRUE(r.terminated);
  EXPECT_EQ(r.reward, 0.0);
}

TEST(Acrobot, WithoutTorqueTruncatesAtStep500) {
  Acrobot env;
  env.reset(11);
  for (double v : env.state()) EXPECT_LE(std::abs(v), 0.1);
  for (int t = 1; t <= 500; ++t) {
    const StepResult r = step_with(env, 1);
    ASSERT_FALSE(r.terminated) << "step " << t;
    EXPECT_EQ(r.reward, -1.0);
    EXPECT_EQ(r.truncated, t == 500) << "step " << t;
  }
}

// --- MountainCar -------------------------------------------------------------------------------

std::array<double, 2> car_next(const std::array<double, 2>& s, double push, double power) {
  double v = s[1] + push * power - 0.0025 * std::cos(3 * s[0]);
  v = std::clamp(v, -0.07, 0.07);
  const double p = std::clamp(s[0] + v, -1.2, 0.6);
  if (p == -1.2 && v < 0) v = 0;
  return {p, v};
}

TEST(MountainCar, StepsFollowTheEquations) {
  MountainCar env;
  std::array<double, 2> s = {-0.5, 0.01};
  env.set_state(s);
  for (int action : {2, 0, 1}) {
    s = car_next(s, action - 1, 0.001);
    const StepResult r = step_with(env, static_cast<float>(action));
    expect_observation(r.observation, {s[0], s[1]});
    EXPECT_EQ(r.reward, -1.0);
    EXPECT_FALSE(r.terminated);
  }
}

TEST(MountainCar, LeftWallStopsTheCar) {
  MountainCar env;
  env.set_state(std::array{-1.19, -0.05});
  const StepResult r = step_with(env, 0);
  EXPECT_FLOAT_EQ(r.observation[0], -1.2f);
  EXPECT_EQ(r.observation[1], 0.0f);
}

TEST(MountainCar, ReachingTheFlagTerminates) {
  MountainCar env;
  env.set_state(std::array{0.49, 0.02});
  const StepResult r = step_with(env, 2);
  EXPECT_TRUE(r.terminated);
  EXPECT_FALSE(r.truncated);
  EXPECT_EQ(r.reward, -1.0);
  EXPECT_GE(r.observation[0], 0.5f);
}

TEST(MountainCar, PushingLeftTruncatesAtStep200) {
  MountainCar env;
  env.reset(5);
  EXPECT_GE(env.state()[0], -0.6);
  EXPECT_LE(env.state()[0], -0.4);
  EXPECT_EQ(env.state()[1], 0.0);
  for (int t = 1; t <= 200; ++t) {
    const StepResult r = step_with(env, 0);
    ASSERT_FALSE(r.terminated) << "step " << t;
    EXPECT_EQ(r.reward, -1.0);
    EXPECT_EQ(r.truncated, t == 200) << "step " << t;
  }
}

TEST(MountainCarContinuous, StepsFollowTheEquationsWithClippedForce) {
  MountainCarContinuous env;
  std::array<double, 2> s = {-0.5, 0.0};
  env.set_state(s);
  for (float action : {0.5f, -3.0f, 1.0f}) {
    s = car_next(s, std::clamp<double>(action, -1, 1), 0.0015);
    const StepResult r = step_with(env, action);
    expect_observation(r.observation, {s[0], s[1]});
    // Gymnasium charges the requested action, not the clipped one.
    EXPECT_NEAR(r.reward, -0.1 * action * action, 1e-12);
    EXPECT_FALSE(r.terminated);
  }
}

TEST(MountainCarContinuous, ReachingTheFlagPaysOneHundred) {
  MountainCarContinuous env;
  env.set_state(std::array{0.44, 0.02});
  const StepResult r = step_with(env, 1.0f);
  EXPECT_TRUE(r.terminated);
  EXPECT_NEAR(r.reward, 100.0 - 0.1, 1e-12);
}

TEST(MountainCarContinuous, IdleTruncatesAtStep999) {
  MountainCarContinuous env;
  env.reset(2);
  for (int t = 1; t <= 999; ++t) {
    const StepResult r = step_with(env, 0.0f);
    ASSERT_FALSE(r.terminated) << "step " << t;
    EXPECT_EQ(r.reward, 0.0);
    EXPECT_EQ(r.truncated, t == 999) << "step " << t;
  }
}

// --- Pendulum ----------------------------------------------------------------------------------

TEST(Pendulum, StepsFollowTheEquations) {
  Pendulum env;
  double th = 1.0, thdot = 0.5;
  env.set_state(std::array{th, thdot});
  for (float action : {0.7f, 3.0f, -1.0f}) {
    const double u = std::clamp<double>(action, -2, 2);
    const double cost = th * th + 0.1 * thdot * thdot + 0.001 * u * u;  // th stays in [-pi, pi)
    thdot = std::clamp(thdot + (15 * std::sin(th) + 3 * u) * 0.05, -8.0, 8.0);
    th += thdot * 0.05;
    const StepResult r = step_with(env, action);
    expect_observation(r.observation, {std::cos(th), std::sin(th), thdot});
    EXPECT_NEAR(r.reward, -cost, 1e-12);
    EXPECT_FALSE(r.terminated);
  }
}

TEST(Pendulum, ClipsTheAngularSpeed) {
  Pendulum env;
  env.set_state(std::array{1.5, 7.9});
  const StepResult r = step_with(env, 2.0f);
  EXPECT_FLOAT_EQ(r.observation[2], 8.0f);
  EXPECT_NEAR(env.state()[0], 1.5 + 8.0 * 0.05, 1e-12);
}

TEST(Pendulum, CostUsesTheAngleNormalisedToPlusMinusPi) {
  for (double th : {1.5 * kPi, -1.5 * kPi, 2 * kPi + 0.25}) {
    Pendulum env;
    env.set_state(std::array{th, 0.0});
    const double normalised = std::remainder(th, 2 * kPi);
    EXPECT_NEAR(step_with(env, 0.0f).reward, -normalised * normalised, 1e-9) << th;
  }
}

TEST(Pendulum, NeverTerminatesAndTruncatesAtStep200) {
  Pendulum env;
  env.reset(9);
  EXPECT_LE(std::abs(env.state()[0]), kPi);
  EXPECT_LE(std::abs(env.state()[1]), 1.0);
  for (int t = 1; t <= 200; ++t) {
    const StepResult r = step_with(env, 2.0f);
    ASSERT_FALSE(r.terminated) << "step " << t;
    EXPECT_LE(r.reward, 0.0);
    EXPECT_EQ(r.truncated, t == 200) << "step " << t;
  }
}

// --- Every environment -------------------------------------------------------------------------

class EveryEnv : public testing::TestWithParam<std::string> {};

INSTANTIATE_TEST_SUITE_P(ClassicControl, EveryEnv,
                         testing::Values("cartpole", "acrobot", "mountaincar",
                                         "mountaincar_continuous", "pendulum"));

TEST_P(EveryEnv, IsNamedAsMadeAndObservesItsSpace) {
  auto env = make_env(GetParam());
  EXPECT_EQ(env->name(), GetParam());
  EXPECT_EQ(static_cast<int>(env->reset(0).size()), env->observation_space().size());
}

TEST_P(EveryEnv, SameSeedGivesTheSameTrajectory) {
  auto a = make_env(GetParam()), b = make_env(GetParam());
  ASSERT_EQ(a->reset(123), b->reset(123));
  for (int i = 0; i < 100; ++i) {
    const auto action = action_for(a->action_space(), i);
    const StepResult ra = a->step(action), rb = b->step(action);
    ASSERT_EQ(ra.observation, rb.observation) << "step " << i;
    ASSERT_EQ(ra.reward, rb.reward);
    ASSERT_EQ(ra.terminated, rb.terminated);
    if (ra.terminated || ra.truncated) break;
  }
}

TEST_P(EveryEnv, DifferentSeedsGiveDifferentStarts) {
  auto env = make_env(GetParam());
  const auto first = env->reset(1);
  EXPECT_NE(env->reset(2), first);
  EXPECT_EQ(env->reset(1), first);
}

TEST_P(EveryEnv, RejectsAnActionOfTheWrongSize) {
  auto env = make_env(GetParam());
  env->reset(0);
  const std::vector<float> too_long(env->action_space().size() + 1, 0.0f);
  EXPECT_THROW(env->step(too_long), Error);
  EXPECT_THROW(env->step(std::span<const float>()), Error);
}

TEST_P(EveryEnv, StepBeforeResetIsAnError) {
  auto env = make_env(GetParam());
  EXPECT_THROW(env->step(action_for(env->action_space(), 0)), Error);
}

TEST_P(EveryEnv, StepAfterTheEpisodeEndedIsAnError) {
  auto env = make_env(GetParam());
  env->reset(4);
  bool ended = false;
  for (int i = 0; i < 1000 && !ended; ++i) {
    const StepResult r = env->step(action_for(env->action_space(), i));
    ended = r.terminated || r.truncated;
  }
  ASSERT_TRUE(ended);
  EXPECT_THROW(env->step(action_for(env->action_space(), 0)), Error);
  env->reset(5);
  EXPECT_NO_THROW(env->step(action_for(env->action_space(), 0)));
}

// --- VectorEnv ---------------------------------------------------------------------------------

TEST(VectorEnv, ResetsEndedCopiesAndKeepsTheirLastObservation) {
  constexpr int kCopies = 4, kSteps = 300;
  VectorEnv vec("cartpole", kCopies, 42);
  ASSERT_EQ(vec.observation_size(), 4);
  const std::vector<float> push_right(kCopies, 1.0f);
  std::vector<double> running(kCopies, 0.0);
  std::vector<std::int64_t> length(kCopies, 0);
  std::vector<double> want_returns;
  std::vector<std::int64_t> want_lengths;
  for (int t = 0; t < kSteps; ++t) {
    const std::vector<float> before = vec.observations();
    const VectorEnv::Step& s = vec.step(push_right);
    for (int c = 0; c < kCopies; ++c) {
      running[c] += s.rewards[c];
      ++length[c];
      const float* final_obs = s.final_observations.data() + 4 * c;
      const float* obs = vec.observations().data() + 4 * c;
      ASSERT_FALSE(s.truncated[c]);
      if (s.terminated[c]) {
        EXPECT_TRUE(std::abs(final_obs[0]) > 2.4f || std::abs(final_obs[2]) > 0.2094f);
        for (int i = 0; i < 4; ++i) EXPECT_LE(std::abs(obs[i]), 0.05f);  // a fresh start
        want_returns.push_back(running[c]);
        want_lengths.push_back(length[c]);
        running[c] = 0;
        length[c] = 0;
      } else {
        for (int i = 0; i < 4; ++i) EXPECT_EQ(final_obs[i], obs[i]);
        EXPECT_NE(obs[0], before[4 * c]);  // the copy moved on rather than restarting
      }
    }
  }
  EXPECT_EQ(vec.steps(), kCopies * kSteps);
  const VectorEnv::Finished finished = vec.take_finished();
  EXPECT_GE(finished.returns.size(), static_cast<std::size_t>(kCopies * 5));
  EXPECT_EQ(finished.lengths, want_lengths);
  ASSERT_EQ(finished.returns.size(), want_returns.size());
  for (std::size_t i = 0; i < want_returns.size(); ++i)
    EXPECT_EQ(finished.returns[i], want_returns[i]);  // reward 1 each step: exact
  EXPECT_TRUE(vec.take_finished().returns.empty());
}

TEST(VectorEnv, TruncatedEpisodesReturnTheSumOfTheirRewards) {
  VectorEnv vec("pendulum", 2, 7);
  const std::vector<float> actions = {0.5f, -1.5f};
  std::vector<double> running(2, 0.0), want;
  for (int t = 1; t <= 450; ++t) {
    const VectorEnv::Step& s = vec.step(actions);
    for (int c = 0; c < 2; ++c) {
      running[c] += s.rewards[c];
      EXPECT_FALSE(s.terminated[c]);
      EXPECT_EQ(s.truncated[c] != 0, t % 200 == 0) << "step " << t;
      if (s.truncated[c]) {
        want.push_back(running[c]);
        running[c] = 0;
      }
    }
  }
  const VectorEnv::Finished finished = vec.take_finished();
  EXPECT_EQ(finished.lengths, (std::vector<std::int64_t>{200, 200, 200, 200}));
  ASSERT_EQ(finished.returns.size(), want.size());
  // The step rewards are floats; the returns are summed in double from the exact rewards.
  for (std::size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(finished.returns[i], want[i], 1e-3);
  EXPECT_EQ(vec.steps(), 900);
}

TEST(VectorEnv, SameSeedReproducesAndCopiesStartApart) {
  VectorEnv a("acrobot", 3, 9), b("acrobot", 3, 9), other("acrobot", 3, 10);
  EXPECT_EQ(a.observations(), b.observations());
  EXPECT_NE(a.observations(), other.observations());
  const int n = a.observation_size();
  for (int c = 1; c < 3; ++c)
    EXPECT_NE(std::vector<float>(a.observations().begin(), a.observations().begin() + n),
              std::vector<float>(a.observations().begin() + c * n,
                                 a.observations().begin() + (c + 1) * n));
  for (int t = 0; t < 600; ++t) {
    const std::vector<float> actions = {static_cast<float>(t % 3), 2.0f, 0.0f};
    a.step(actions);
    b.step(actions);
    ASSERT_EQ(a.observations(), b.observations()) << "step " << t;
  }
  EXPECT_EQ(a.take_finished().returns, b.take_finished().returns);
}

// Workers change where the copies step, not what they do: the same actions give the same
// observations, rewards, ends and finished episodes (in the same order) as one thread does,
// whether the copies step all at once or group by group. 5 copies: groups of 2 and 3.
TEST(VectorEnv, WorkersStepTheCopiesAsOneThreadDoes) {
  constexpr int kCopies = 5;
  for (int workers : {2, 3}) {
    VectorEnv reference("acrobot", kCopies, 21), threaded("acrobot", kCopies, 21, {}, workers);
    ASSERT_EQ(threaded.groups(), 2);
    EXPECT_EQ(threaded.group(0).count + threaded.group(1).count, kCopies);
    for (int t = 0; t < 1200; ++t) {
      std::vector<float> actions(kCopies);
      for (int c = 0; c < kCopies; ++c) actions[c] = static_cast<float>((t / (c + 1) + c) % 3);
      const VectorEnv::Step want = reference.step(actions);
      VectorEnv::Step got;
      if (t % 2 == 0) {
        got = threaded.step(actions);
      } else {  // group by group, as collect_rollout steps them
        for (int g = 0; g < 2; ++g) {
          const VectorEnv::Group grp = threaded.group(g);
          threaded.start_step(g, std::span<const float>(actions).subspan(grp.first, grp.count));
        }
        for (int g = 0; g < 2; ++g) got = threaded.finish_step(g);
      }
      ASSERT_EQ(got.rewards, want.rewards) << "workers " << workers << ", step " << t;
      ASSERT_EQ(got.terminated, want.terminated);
      ASSERT_EQ(got.truncated, want.truncated);
      ASSERT_EQ(got.final_observations, want.final_observations);
      ASSERT_EQ(threaded.observations(), reference.observations());
    }
    EXPECT_EQ(threaded.steps(), reference.steps());
    const VectorEnv::Finished want = reference.take_finished(), got = threaded.take_finished();
    EXPECT_GE(want.returns.size(), 5u);
    EXPECT_EQ(got.returns, want.returns);
    EXPECT_EQ(got.lengths, want.lengths);
  }
}

// A copy that fails on a worker is the same EnvError as without workers, naming the copy; it
// reaches the caller (once every worker is idle) instead of being lost on the worker's thread.
TEST(VectorEnv, AFailureOnAWorkerNamesTheCopy) {
  VectorEnv vec("cartpole", 4, 3, {}, 2);
  std::vector<float> actions = {0, 1, 0, 7};  // 7 is no action of Discrete(2)
  try {
    vec.step(actions);
    FAIL() << "an action out of range was stepped";
  } catch (const EnvError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("'cartpole'"), std::string::npos) << what;
    EXPECT_NE(what.find("copy 3, step 1 of episode 1"), std::string::npos) << what;
  }
}

TEST(VectorEnv, RejectsBadConstructionAndActionCounts) {
  EXPECT_THROW(VectorEnv("no_such_env", 2, 0), ConfigError);
  EXPECT_THROW(VectorEnv("cartpole", 0, 0), ConfigError);
  EXPECT_THROW(VectorEnv("cartpole", 2, 0, {}, 0), ConfigError);
  VectorEnv vec("mountaincar_continuous", 3, 1);
  EXPECT_THROW(vec.step(std::vector<float>(2, 0.0f)), Error);
  EXPECT_NO_THROW(vec.step(std::vector<float>(3, 0.0f)));
}

}  // namespace
}  // namespace distml::rl
