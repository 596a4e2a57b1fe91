// The environments by name: the built-in ones, the user's registered ones, and external
// processes ("exec:COMMAND").
#include <map>
#include <mutex>
#include <utility>

#include "distml/core/error.h"
#include "distml/rl/envs/classic_control.h"
#include "distml/rl/envs/env.h"
#include "distml/rl/envs/exec_env.h"
#include "distml/rl/envs/humanoid.h"

namespace distml::rl {
namespace {

constexpr std::string_view kExecPrefix = "exec:";

bool is_exec(std::string_view name) { return name.substr(0, kExecPrefix.size()) == kExecPrefix; }

// Built-in and registered environments, in registration order; guarded by a mutex because
// ranks of the in-process engine are threads.
struct Registry {
  std::mutex mutex;
  std::vector<std::pair<std::string, EnvFactory>> factories = {
      {"cartpole", [] { return std::make_unique<CartPole>(); }},
      {"acrobot", [] { return std::make_unique<Acrobot>(); }},
      {"mountaincar", [] { return std::make_unique<MountainCar>(); }},
      {"mountaincar_continuous", [] { return std::make_unique<MountainCarContinuous>(); }},
      {"pendulum", [] { return std::make_unique<Pendulum>(); }},
      {"humanoid", [] { return std::make_unique<Humanoid>(); }},
  };
  std::map<std::string, EnvSpaces, std::less<>> spaces;

  const EnvFactory* find(std::string_view name) {
    for (const auto& [known, factory] : factories)
      if (known == name) return &factory;
    return nullptr;
  }
};

Registry& registry() {
  static Registry r;
  return r;
}

}  // namespace

std::vector<std::string> env_names() {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  std::vector<std::string> out;
  for (const auto& [name, factory] : r.factories) out.push_back(name);
  return out;
}

bool env_exists(std::string_view name) {
  if (is_exec(name)) return name.size() > kExecPrefix.size();
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  return r.find(name) != nullptr;
}

void register_env(const std::string& name, EnvFactory factory) {
  if (name.empty() || is_exec(name))
    throw ConfigError(cat("register_env: '", name,
                          "' cannot name an environment (empty, or it "
                          "starts with \"exec:\", which names an external process)"));
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  if (r.find(name)) throw ConfigError(cat("register_env: the name '", name, "' is taken"));
  r.factories.emplace_back(name, std::move(factory));
}

std::unique_ptr<Env> make_env(std::string_view name, const EnvOptions& options) {
  if (is_exec(name) && name.size() > kExecPrefix.size())
    return std::make_unique<ExecEnv>(std::string(name.substr(kExecPrefix.size())), options);
  EnvFactory factory;
  {
    Registry& r = registry();
    std::lock_guard lock(r.mutex);
    if (const EnvFactory* f = r.find(name)) factory = *f;
  }
  if (factory) return factory();
  throw ConfigError(cat("unknown environment '", name, "'; expected one of ", env_choices()));
}

std::string env_choices() {
  std::string names;
  for (const auto& known : env_names()) names += known + ", ";
  return names + "or exec:COMMAND for an external process";
}

EnvError env_failure(std::string_view name, const std::string& where, const std::exception& e) {
  return EnvError(cat("environment '", name, "' (", where, "): ", e.what()));
}

const EnvSpaces& env_spaces(std::string_view name) {
  Registry& r = registry();
  {
    std::lock_guard lock(r.mutex);
    if (auto it = r.spaces.find(name); it != r.spaces.end()) return it->second;
  }
  auto env = make_env(name);  // outside the lock: a factory may take its time
  std::lock_guard lock(r.mutex);
  return r.spaces.try_emplace(std::string(name), env->observation_space(), env->action_space())
      .first->second;
}

}  // namespace distml::rl
