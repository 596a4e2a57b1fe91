#include "distml/rl/envs/classic_control.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <numbers>
#include <utility>

#include "distml/core/error.h"
#include "distml/data/permutation.h"

namespace distml::rl {
namespace {

constexpr double kPi = std::numbers::pi;

using data::SplitMix64;  // the same numbers on every platform, unlike <random>'s distributions

std::vector<float> to_floats(std::span<const double> values) {
  return {values.begin(), values.end()};
}

}  // namespace

ClassicControlEnv::ClassicControlEnv(std::string name, Space observation_space, Space action_space,
                                     std::vector<double> start_low, std::vector<double> start_high,
                                     int max_episode_steps)
    : name_(std::move(name)),
      observation_space_(std::move(observation_space)),
      action_space_(std::move(action_space)),
      start_low_(std::move(start_low)),
      start_high_(std::move(start_high)),
      max_episode_steps_(max_episode_steps),
      state_(start_low_.size(), 0.0) {
  DML_CHECK_EQ(start_low_.size(), start_high_.size(), name_);
}

std::vector<float> ClassicControlEnv::reset(std::uint64_t seed) {
  SplitMix64 rng(seed);
  for (std::size_t i = 0; i < state_.size(); ++i)
    state_[i] = start_low_[i] + (start_high_[i] - start_low_[i]) * rng.uniform();
  steps_ = 0;
  started_ = true;
  ended_ = false;
  return observe(state_);
}

void ClassicControlEnv::set_state(std::span<const double> state) {
  if (state.size() != state_.size())
    throw Error(cat(name_, ": set_state got ", state.size(), " values, expected ", state_.size()));
  for (double v : state)
    if (!std::isfinite(v)) throw Error(cat(name_, ": set_state got a non-finite value ", v));
  std::copy(state.begin(), state.end(), state_.begin());
  steps_ = 0;
  started_ = true;
  ended_ = false;
}

void ClassicControlEnv::check_action(std::span<const float> action) const {
  if (static_cast<int>(action.size()) != action_space_.size())
    throw Error(
        cat(name_, ": action has ", action.size(), " values, expected ", action_space_.size()));
  if (action_space_.is_discrete()) {
    const float a = action[0];
    // NaN fails every comparison, so it lands here too.
    if (!(a >= 0 && a < static_cast<float>(action_space_.n) && std::floor(a) == a))
      throw Error(cat(name_, ": action ", a, " is not an integer in [0, ", action_space_.n, ")"));
  } else {
    for (float a : action)
      if (std::isnan(a)) throw Error(cat(name_, ": action is NaN"));
  }
}

StepResult ClassicControlEnv::step(std::span<const float> action) {
  if (!started_) throw Error(cat(name_, ": step() before reset()"));
  if (ended_) throw Error(cat(name_, ": step() after the episode ended; call reset() first"));
  check_action(action);
  const Outcome outcome = advance(state_, action);
  ++steps_;
  StepResult result;
  result.observation = observe(state_);
  result.reward = outcome.reward;
  result.terminated = outcome.terminated;
  // Gymnasium's TimeLimit truncates whether or not the same step also terminated.
  result.truncated = steps_ >= max_episode_steps_;
  ended_ = result.terminated || result.truncated;
  return result;
}

// --- CartPole-v1 -------------------------------------------------------------------------------

namespace {
constexpr double kCartGravity = 9.8, kMassCart = 1.0, kMassPole = 0.1;
constexpr double kTotalMass = kMassCart + kMassPole;
constexpr double kHalfPole = 0.5;
constexpr double kPoleMassLength = kMassPole * kHalfPole;
constexpr double kForceMag = 10.0, kTau = 0.02;
constexpr double kThetaThreshold = 12 * 2 * kPi / 360;
constexpr double kXThreshold = 2.4;
constexpr float kFloatMax = std::numeric_limits<float>::max();
}  // namespace

CartPole::CartPole()
    : ClassicControlEnv("cartpole",
                        Space::box({-2 * kXThreshold, -kFloatMax, -2 * kThetaThreshold, -kFloatMax},
                                   {2 * kXThreshold, kFloatMax, 2 * kThetaThreshold, kFloatMax}),
                        Space::discrete(2), {-0.05, -0.05, -0.05, -0.05}, {0.05, 0.05, 0.05, 0.05},
                        500) {}

ClassicControlEnv::Outcome CartPole::advance(std::span<double> s,
                                             std::span<const float> action) const {
  const double force = action[0] == 1 ? kForceMag : -kForceMag;
  const double x = s[0], x_dot = s[1], theta = s[2], theta_dot = s[3];
  const double costheta = std::cos(theta), sintheta = std::sin(theta);
  const double temp = (force + kPoleMassLength * theta_dot * theta_dot * sintheta) / kTotalMass;
  const double thetaacc = (kCartGravity * sintheta - costheta * temp) /
                          (kHalfPole * (4.0 / 3.0 - kMassPole * costheta * costheta / kTotalMass));
  const double xacc = temp - kPoleMassLength * thetaacc * costheta / kTotalMass;
  // Explicit Euler, Gymnasium's default integrator: positions move with the old velocities.
  s[0] = x + kTau * x_dot;
  s[1] = x_dot + kTau * xacc;
  s[2] = theta + kTau * theta_dot;
  s[3] = theta_dot + kTau * thetaacc;
  const bool fell = s[0] < -kXThreshold || s[0] > kXThreshold || s[2] < -kThetaThreshold ||
                    s[2] > kThetaThreshold;
  return {1.0, fell};
}

std::vector<float> CartPole::observe(std::span<const double> s) const { return to_floats(s); }

// --- Acrobot-v1 --------------------------------------------------------------------------------

namespace {
constexpr double kAcrobotDt = 0.2;
constexpr double kLinkLength1 = 1.0, kLinkMass1 = 1.0, kLinkMass2 = 1.0;
constexpr double kLinkCom1 = 0.5, kLinkCom2 = 0.5, kLinkMoi = 1.0;
constexpr double kMaxVel1 = 4 * kPi, kMaxVel2 = 9 * kPi;
constexpr double kAcrobotGravity = 9.8;
constexpr std::array<double, 3> kTorques = {-1.0, 0.0, 1.0};

using AcrobotState = std::array<double, 4>;

// The book (and RLPy Java) equations, not the NIPS paper's: the extra
// -m2 l1 lc2 dtheta1^2 sin(theta2) term in ddtheta2 is what tells them apart.
AcrobotState acrobot_derivative(const AcrobotState& s, double torque) {
  const double m1 = kLinkMass1, m2 = kLinkMass2, l1 = kLinkLength1;
  const double lc1 = kLinkCom1, lc2 = kLinkCom2, i1 = kLinkMoi, i2 = kLinkMoi;
  const double g = kAcrobotGravity;
  const double theta1 = s[0], theta2 = s[1], dtheta1 = s[2], dtheta2 = s[3];
  const double d1 =
      m1 * lc1 * lc1 + m2 * (l1 * l1 + lc2 * lc2 + 2 * l1 * lc2 * std::cos(theta2)) + i1 + i2;
  const double d2 = m2 * (lc2 * lc2 + l1 * lc2 * std::cos(theta2)) + i2;
  const double phi2 = m2 * lc2 * g * std::cos(theta1 + theta2 - kPi / 2.0);
  const double phi1 = -m2 * l1 * lc2 * dtheta2 * dtheta2 * std::sin(theta2) -
                      2 * m2 * l1 * lc2 * dtheta2 * dtheta1 * std::sin(theta2) +
                      (m1 * lc1 + m2 * l1) * g * std::cos(theta1 - kPi / 2) + phi2;
  const double ddtheta2 =
      (torque + d2 / d1 * phi1 - m2 * l1 * lc2 * dtheta1 * dtheta1 * std::sin(theta2) - phi2) /
      (m2 * lc2 * lc2 + i2 - d2 * d2 / d1);
  const double ddtheta1 = -(d2 * ddtheta2 + phi1) / d1;
  return {dtheta1, dtheta2, ddtheta1, ddtheta2};
}

// Gymnasium's wrap(): whole turns added or removed one at a time, so values already in range are
// returned bit for bit.
double wrap(double x, double low, double high) {
  const double diff = high - low;
  while (x > high) x -= diff;
  while (x < low) x += diff;
  return x;
}
}  // namespace

Acrobot::Acrobot()
    : ClassicControlEnv(
          "acrobot",
          Space::box({-1, -1, -1, -1, static_cast<float>(-kMaxVel1), static_cast<float>(-kMaxVel2)},
                     {1, 1, 1, 1, static_cast<float>(kMaxVel1), static_cast<float>(kMaxVel2)}),
          Space::discrete(3), {-0.1, -0.1, -0.1, -0.1}, {0.1, 0.1, 0.1, 0.1}, 500) {}

ClassicControlEnv::Outcome Acrobot::advance(std::span<double> s,
                                            std::span<const float> action) const {
  const double torque = kTorques[static_cast<int>(action[0])];
  // One RK4 step over [0, dt] with the torque held constant, as Gymnasium's rk4() does by
  // carrying it as a fifth state component whose derivative is zero.
  const AcrobotState y0 = {s[0], s[1], s[2], s[3]};
  const auto along = [&](const AcrobotState& k, double h) {
    AcrobotState y;
    for (int i = 0; i < 4; ++i) y[i] = y0[i] + h * k[i];
    return y;
  };
  const double dt = kAcrobotDt, dt2 = dt / 2.0;
  const AcrobotState k1 = acrobot_derivative(y0, torque);
  const AcrobotState k2 = acrobot_derivative(along(k1, dt2), torque);
  const AcrobotState k3 = acrobot_derivative(along(k2, dt2), torque);
  const AcrobotState k4 = acrobot_derivative(along(k3, dt), torque);
  for (int i = 0; i < 4; ++i) s[i] = y0[i] + dt / 6.0 * (k1[i] + 2 * k2[i] + 2 * k3[i] + k4[i]);
  s[0] = wrap(s[0], -kPi, kPi);
  s[1] = wrap(s[1], -kPi, kPi);
  s[2] = std::clamp(s[2], -kMaxVel1, kMaxVel1);
  s[3] = std::clamp(s[3], -kMaxVel2, kMaxVel2);
  const bool swung_up = -std::cos(s[0]) - std::cos(s[1] + s[0]) > 1.0;
  return {swung_up ? 0.0 : -1.0, swung_up};
}

std::vector<float> Acrobot::observe(std::span<const double> s) const {
  return to_floats(
      std::array{std::cos(s[0]), std::sin(s[0]), std::cos(s[1]), std::sin(s[1]), s[2], s[3]});
}

// --- MountainCar-v0 and MountainCarContinuous-v0 -----------------------------------------------

namespace {
constexpr double kMinPosition = -1.2, kMaxPosition = 0.6, kMaxSpeed = 0.07;
constexpr double kCarGravity = 0.0025;

Space mountain_car_observations() {
  return Space::box({static_cast<float>(kMinPosition), static_cast<float>(-kMaxSpeed)},
                    {static_cast<float>(kMaxPosition), static_cast<float>(kMaxSpeed)});
}

// Both versions share this: clip the speed, move, clip the position, and stop dead at the left
// wall (an inelastic collision) rather than bounce.
void move_car(std::span<double> s, double velocity) {
  velocity = std::clamp(velocity, -kMaxSpeed, kMaxSpeed);
  double position = std::clamp(s[0] + velocity, kMinPosition, kMaxPosition);
  if (position == kMinPosition && velocity < 0) velocity = 0;
  s[0] = position;
  s[1] = velocity;
}
}  // namespace

MountainCar::MountainCar()
    : ClassicControlEnv("mountaincar", mountain_car_observations(), Space::discrete(3), {-0.6, 0},
                        {-0.4, 0}, 200) {}

ClassicControlEnv::Outcome MountainCar::advance(std::span<double> s,
                                                std::span<const float> action) const {
  constexpr double kForce = 0.001, kGoalPosition = 0.5;
  const int push = static_cast<int>(action[0]) - 1;
  move_car(s, s[1] + (push * kForce + std::cos(3 * s[0]) * (-kCarGravity)));
  return {-1.0, s[0] >= kGoalPosition && s[1] >= 0};
}

std::vector<float> MountainCar::observe(std::span<const double> s) const { return to_floats(s); }

MountainCarContinuous::MountainCarContinuous()
    : ClassicControlEnv("mountaincar_continuous", mountain_car_observations(),
                        Space::box({-1}, {1}), {-0.6, 0}, {-0.4, 0}, 999) {}

ClassicControlEnv::Outcome MountainCarContinuous::advance(std::span<double> s,
                                                          std::span<const float> action) const {
  constexpr double kPower = 0.0015, kGoalPosition = 0.45;
  const double force = std::clamp(static_cast<double>(action[0]), -1.0, 1.0);
  move_car(s, s[1] + (force * kPower - kCarGravity * std::cos(3 * s[0])));
  const bool reached = s[0] >= kGoalPosition && s[1] >= 0;
  // Gymnasium charges the action as given, not as clipped: asking for more than the bound costs
  // more without pushing harder.
  const double a = action[0];
  return {(reached ? 100.0 : 0.0) - a * a * 0.1, reached};
}

std::vector<float> MountainCarContinuous::observe(std::span<const double> s) const {
  return to_floats(s);
}

// --- Pendulum-v1 -------------------------------------------------------------------------------

namespace {
constexpr double kPendulumMaxSpeed = 8, kMaxTorque = 2.0, kPendulumDt = 0.05;
constexpr double kPendulumGravity = 10.0, kPendulumMass = 1.0, kPendulumLength = 1.0;

// Python's ((x + pi) % (2 pi)) - pi: the remainder takes the divisor's sign, unlike std::fmod.
double angle_normalize(double x) {
  double r = std::fmod(x + kPi, 2 * kPi);
  if (r < 0) r += 2 * kPi;
  return r - kPi;
}
}  // namespace

Pendulum::Pendulum()
    : ClassicControlEnv("pendulum",
                        Space::box({-1, -1, -kPendulumMaxSpeed}, {1, 1, kPendulumMaxSpeed}),
                        Space::box({-kMaxTorque}, {kMaxTorque}), {-kPi, -1.0}, {kPi, 1.0}, 200) {}

ClassicControlEnv::Outcome Pendulum::advance(std::span<double> s,
                                             std::span<const float> action) const {
  const double g = kPendulumGravity, m = kPendulumMass, l = kPendulumLength, dt = kPendulumDt;
  const double th = s[0], thdot = s[1];
  const double u = std::clamp(static_cast<double>(action[0]), -kMaxTorque, kMaxTorque);
  const double th_error = angle_normalize(th);
  const double cost = th_error * th_error + 0.1 * thdot * thdot + 0.001 * (u * u);
  double newthdot = thdot + (3 * g / (2 * l) * std::sin(th) + 3.0 / (m * l * l) * u) * dt;
  newthdot = std::clamp(newthdot, -kPendulumMaxSpeed, kPendulumMaxSpeed);
  s[0] = th + newthdot * dt;
  s[1] = newthdot;
  return {-cost, false};
}

std::vector<float> Pendulum::observe(std::span<const double> s) const {
  return to_floats(std::array{std::cos(s[0]), std::sin(s[0]), s[1]});
}

}  // namespace distml::rl
