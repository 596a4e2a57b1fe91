#include "distml/rl/envs/humanoid.h"

#include <mujoco/mujoco.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <limits>
#include <map>
#include <mutex>

#include "distml/core/error.h"
#include "distml/data/permutation.h"

#ifndef DISTML_HUMANOID_XML
#error "DISTML_HUMANOID_XML must name the MuJoCo humanoid model (src/distml/rl/envs/CMakeLists.txt)"
#endif

namespace distml::rl {
namespace {

// Parsing and compiling the XML takes ~30 ms, which a few hundred actor copies would pay over
// and over; the compiled model is read-only while stepping, so copies share one per path.
std::shared_ptr<const mjModel> load_model(const std::string& path) {
  static std::mutex mutex;
  static std::map<std::string, std::shared_ptr<const mjModel>> models;
  std::lock_guard lock(mutex);
  if (auto it = models.find(path); it != models.end()) return it->second;
  char error[1024] = "";
  mjModel* raw = mj_loadXML(path.c_str(), nullptr, error, sizeof error);
  if (raw == nullptr) {
    std::string why = error;
    while (!why.empty() && std::isspace(static_cast<unsigned char>(why.back()))) why.pop_back();
    throw ConfigError(cat("humanoid: cannot load the MuJoCo model '", path, "': ", why,
                          " (set DISTML_HUMANOID_XML, or install libmujoco-samples)"));
  }
  std::shared_ptr<const mjModel> model(
      raw, [](const mjModel* m) { mj_deleteModel(const_cast<mjModel*>(m)); });
  models.emplace(path, model);
  return model;
}

using data::SplitMix64;  // the start state follows from reset's seed alone, on every platform

}  // namespace

void Humanoid::DataDeleter::operator()(mjData* data) const { mj_deleteData(data); }

Humanoid::Humanoid() : model_(load_model(model_path())), data_(mj_makeData(model_.get())) {
  const mjModel& m = *model_;
  const int observation_size = (m.nq - 2) + m.nv + 10 * m.nbody + 6 * m.nbody + m.nv + 6 * m.nbody;
  const float inf = std::numeric_limits<float>::infinity();
  observation_space_ = Space::box(std::vector<float>(observation_size, -inf),
                                  std::vector<float>(observation_size, inf));
  std::vector<float> low(m.nu, -1.0f), high(m.nu, 1.0f);
  for (int i = 0; i < m.nu; ++i) {
    if (!m.actuator_ctrllimited[i]) continue;
    low[i] = static_cast<float>(m.actuator_ctrlrange[2 * i]);
    high[i] = static_cast<float>(m.actuator_ctrlrange[2 * i + 1]);
  }
  action_space_ = Space::box(std::move(low), std::move(high));
  for (int b = 0; b < m.nbody; ++b) total_mass_ += m.body_mass[b];
}

Humanoid::~Humanoid() = default;
Humanoid::Humanoid(Humanoid&&) noexcept = default;
Humanoid& Humanoid::operator=(Humanoid&&) noexcept = default;

std::string Humanoid::model_path() {
  const char* override_path = std::getenv("DISTML_HUMANOID_XML");
  return override_path != nullptr && *override_path != '\0' ? override_path : DISTML_HUMANOID_XML;
}

std::vector<float> Humanoid::reset(std::uint64_t seed) {
  const mjModel& m = *model_;
  mjData& d = *data_;
  mj_resetData(&m, &d);  // qpos = qpos0, qvel = 0, time, ctrl and warm starts cleared
  SplitMix64 rng(seed);
  for (int i = 0; i < m.nq; ++i) d.qpos[i] += rng.uniform(-kResetNoise, kResetNoise);
  for (int i = 0; i < m.nv; ++i) d.qvel[i] += rng.uniform(-kResetNoise, kResetNoise);
  return start_episode();
}

void Humanoid::set_state(std::span<const double> qpos, std::span<const double> qvel) {
  const mjModel& m = *model_;
  mjData& d = *data_;
  if (static_cast<int>(qpos.size()) != m.nq || static_cast<int>(qvel.size()) != m.nv)
    throw Error(cat("humanoid: set_state takes ", m.nq, " qpos and ", m.nv, " qvel values, got ",
                    qpos.size(), " and ", qvel.size()));
  mj_resetData(&m, &d);
  std::copy(qpos.begin(), qpos.end(), d.qpos);
  std::copy(qvel.begin(), qvel.end(), d.qvel);
  start_episode();
}

std::vector<float> Humanoid::start_episode() {
  mj_forward(model_.get(), data_.get());
  // MuJoCo computes cfrc_ext only on request; Gymnasium requests it after every step.
  mj_rnePostConstraint(model_.get(), data_.get());
  steps_ = 0;
  episode_over_ = false;
  return observe();
}

StepResult Humanoid::step(std::span<const float> action) {
  const mjModel& m = *model_;
  mjData& d = *data_;
  if (episode_over_)
    throw Error(steps_ == 0 ? "humanoid: step() before the first reset()"
                            : "humanoid: step() after the episode ended; call reset() first");
  if (static_cast<int>(action.size()) != m.nu)
    throw Error(cat("humanoid: action has ", action.size(), " floats, expected ", m.nu));

  double ctrl_cost = 0;
  for (int i = 0; i < m.nu; ++i) {
    d.ctrl[i] = action[i];  // MuJoCo clamps it to ctrlrange when it applies it
    ctrl_cost += d.ctrl[i] * d.ctrl[i];
  }
  ctrl_cost *= kCtrlCostWeight;

  const double x_before = mass_center_x();
  for (int k = 0; k < kFrameSkip; ++k) mj_step(&m, &d);
  mj_rnePostConstraint(&m, &d);
  const double x_after = mass_center_x();
  ++steps_;

  const double z = torso_height();
  const bool healthy = kHealthyZMin < z && z < kHealthyZMax;
  StepResult result;
  result.observation = observe();
  result.reward = kForwardRewardWeight * (x_after - x_before) / dt() + kHealthyReward - ctrl_cost;
  result.terminated = !healthy;
  // A fall on the last step is a fall: terminated wins, so nothing bootstraps from it.
  result.truncated = !result.terminated && steps_ >= kMaxSteps;
  episode_over_ = result.terminated || result.truncated;
  return result;
}

double Humanoid::dt() const { return model_->opt.timestep * kFrameSkip; }

double Humanoid::mass_center_x() const {
  // xipos is where mj_step last ran the kinematics, one substep behind qpos, as in Gymnasium.
  double weighted = 0;
  for (int b = 0; b < model_->nbody; ++b) weighted += model_->body_mass[b] * data_->xipos[3 * b];
  return weighted / total_mass_;
}

double Humanoid::torso_height() const { return data_->qpos[2]; }

std::vector<float> Humanoid::observe() const {
  const mjModel& m = *model_;
  const mjData& d = *data_;
  std::vector<float> out;
  out.reserve(observation_space_.size());
  const auto append = [&out](const mjtNum* from, int count) {
    out.insert(out.end(), from, from + count);
  };
  append(d.qpos + 2, m.nq - 2);  // x and y left out: the policy must not depend on them
  append(d.qvel, m.nv);
  append(d.cinert, 10 * m.nbody);
  append(d.cvel, 6 * m.nbody);
  append(d.qfrc_actuator, m.nv);
  append(d.cfrc_ext, 6 * m.nbody);
  return out;
}

}  // namespace distml::rl
