// The environment interface of distml's reinforcement learning: Gymnasium's reset/step with its
// terminated/truncated split, over two kinds of space (Discrete and Box).
//
// An action is always a span of floats: a Discrete action is one float holding the index, a
// Box action has one float per dimension. Environments clip Box actions to their bounds, as
// the Gymnasium versions do.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "distml/core/error.h"

namespace distml::rl {

struct Space {
  enum class Kind { discrete, box };
  Kind kind = Kind::discrete;
  int n = 0;                     // discrete: actions 0..n-1
  std::vector<float> low, high;  // box: per-dimension bounds (size = dimension)

  static Space discrete(int n) { return {Kind::discrete, n, {}, {}}; }
  static Space box(std::vector<float> low, std::vector<float> high) {
    return {Kind::box, 0, std::move(low), std::move(high)};
  }
  bool is_discrete() const { return kind == Kind::discrete; }
  /// Floats in one element of the space: 1 for discrete, the dimension for box.
  int size() const { return is_discrete() ? 1 : static_cast<int>(low.size()); }
};

struct StepResult {
  std::vector<float> observation;
  double reward = 0;
  bool terminated = false;  // the task ended (pole fell, goal reached): no bootstrap
  bool truncated = false;   // the time limit cut the episode: bootstrap from the observation
};

class Env {
 public:
  virtual ~Env() = default;
  virtual std::string_view name() const = 0;
  virtual const Space& observation_space() const = 0;
  virtual const Space& action_space() const = 0;
  /// Starts an episode; the start state is drawn from `seed` alone, so equal seeds give
  /// equal episodes under equal actions.
  virtual std::vector<float> reset(std::uint64_t seed) = 0;
  /// Advances one step. `action.size()` must equal action_space().size().
  virtual StepResult step(std::span<const float> action) = 0;
};

/// How environments are made: the deadline of every answer an external environment owes.
struct EnvOptions {
  double timeout_s = 120;
};

/// The environment called `name`: a built-in one (cartpole, acrobot, mountaincar,
/// mountaincar_continuous, pendulum, humanoid), one registered with register_env, or
/// "exec:COMMAND", an external process speaking the line protocol of exec_env.h. ConfigError
/// listing the names for any other; EnvError when an external one cannot start.
std::unique_ptr<Env> make_env(std::string_view name, const EnvOptions& options = {});
/// The built-in and registered names, in --help order ("exec:COMMAND" is not listed).
std::vector<std::string> env_names();
/// True when make_env knows `name` (exec: names included).
bool env_exists(std::string_view name);
/// "cartpole, acrobot, ..., or exec:COMMAND for an external process": what an unknown name
/// should have been.
std::string env_choices();

/// Makes environments of the user's own: `distml::rl::register_env("corridor", [] { return
/// std::make_unique<Corridor>(); })`, then env.name = "corridor". Register before loading a
/// config that names it, on every rank (each process runs its own main). ConfigError for a
/// name that is taken, empty, or starts with "exec:".
using EnvFactory = std::function<std::unique_ptr<Env>()>;
void register_env(const std::string& name, EnvFactory factory);

/// An environment's failure in context: EnvError "environment 'NAME' (WHERE): what".
EnvError env_failure(std::string_view name, const std::string& where, const std::exception& e);

/// The spaces of environment `name`, made once per name and process and then remembered (an
/// external environment is started only to ask).
struct EnvSpaces {
  Space observation, action;
};
const EnvSpaces& env_spaces(std::string_view name);

}  // namespace distml::rl
