#include <functional>
#include <utility>

#include "distml/core/error.h"
#include "distml/rl/envs/classic_control.h"
#include "distml/rl/envs/env.h"
#include "distml/rl/envs/humanoid.h"

namespace distml::rl {
namespace {

using Factory = std::function<std::unique_ptr<Env>()>;

const std::vector<std::pair<std::string, Factory>>& factories() {
  static const std::vector<std::pair<std::string, Factory>> table = {
      {"cartpole", [] { return std::make_unique<CartPole>(); }},
      {"acrobot", [] { return std::make_unique<Acrobot>(); }},
      {"mountaincar", [] { return std::make_unique<MountainCar>(); }},
      {"mountaincar_continuous", [] { return std::make_unique<MountainCarContinuous>(); }},
      {"pendulum", [] { return std::make_unique<Pendulum>(); }},
      {"humanoid", [] { return std::make_unique<Humanoid>(); }},
  };
  return table;
}

}  // namespace

const std::vector<std::string>& env_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const auto& [name, factory] : factories()) out.push_back(name);
    return out;
  }();
  return names;
}

std::unique_ptr<Env> make_env(std::string_view name) {
  for (const auto& [known, factory] : factories())
    if (known == name) return factory();
  std::string names;
  for (const auto& known : env_names()) names += (names.empty() ? "" : ", ") + known;
  throw ConfigError(cat("unknown environment '", name, "'; expected one of ", names));
}

}  // namespace distml::rl
