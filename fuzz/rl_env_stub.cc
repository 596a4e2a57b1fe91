// The environments as the RL config sees them (rl/envs/env.h: env_exists, env_choices,
// env_spaces), for the rl_config target: the built-in names with their spaces, and any exec:
// name with a box of both. The real env_spaces starts an exec: environment's command to ask it,
// which a fuzzer's input must never do; the environments are not what the target fuzzes.
#include <map>
#include <string>

#include "distml/rl/envs/env.h"

namespace distml::rl {
namespace {

Space box(int n) { return Space::box(std::vector<float>(n, -1), std::vector<float>(n, 1)); }

const std::map<std::string, EnvSpaces, std::less<>>& builtin() {
  static const std::map<std::string, EnvSpaces, std::less<>> spaces{
      {"cartpole", {box(4), Space::discrete(2)}},
      {"acrobot", {box(6), Space::discrete(3)}},
      {"mountaincar", {box(2), Space::discrete(3)}},
      {"mountaincar_continuous", {box(2), box(1)}},
      {"pendulum", {box(3), box(1)}},
      {"humanoid", {box(348), box(17)}}};
  return spaces;
}

bool is_exec(std::string_view name) { return name.rfind("exec:", 0) == 0; }

}  // namespace

bool env_exists(std::string_view name) {
  return is_exec(name) ? name.size() > 5 : builtin().count(name) > 0;
}

std::string env_choices() { return "cartpole, ..., or exec:COMMAND (the fuzz stub's)"; }

const EnvSpaces& env_spaces(std::string_view name) {
  static const EnvSpaces exec{box(3), box(2)};
  if (is_exec(name)) return exec;
  return builtin().find(name)->second;
}

}  // namespace distml::rl
