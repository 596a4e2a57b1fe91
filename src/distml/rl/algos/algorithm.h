// What every RL algorithm of distml takes and returns, and the one entry point that picks the
// algorithm by name. Rank roles are each algorithm's own (see docs/rl.md):
//   ppo, a2c  every rank an actor-learner; gradients all-reduced each minibatch (DPPO)
//   a3c       rank 0 holds the parameters; the others push gradients and pull parameters
//   impala    rank 0 the learner; the others actors sending unrolls
//   apex      rank 0 the learner, the last rank the replay, the others actors (DQN)
//   apex_dpg  the same roles (DPG, for continuous actions)
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>

#include "distml/comm/communicator.h"
#include "distml/core/timeline.h"
#include "distml/rl/rl_config.h"

namespace distml::rl {

struct RunResult {
  double eval_mean_return = 0;
  std::int64_t eval_episodes = 0;
  std::int64_t env_steps = 0;
  double env_steps_per_sec = 0;
  nlohmann::json report = nlohmann::json::object();  // algorithm-specific done-line fields
  /// ppo and a2c, on every rank: a hash of the final parameters (the ranks must agree).
  std::uint64_t parameter_digest = 0;
  /// On rank 0: the run stopped on a preemption after checkpointing (core/preemption.h); no
  /// final evaluation was made.
  bool preempted = false;
  std::int64_t updates = 0;  // the updates done, with `preempted`
};

/// Called on rank 0 only: a JSON event ({"event": "update" | "eval" | "checkpoint" |
/// "actor_lost", ...}) and the progress in environment steps.
struct RunHooks {
  std::function<void(const nlohmann::json&)> event = [](const nlohmann::json&) {};
  std::function<void(std::int64_t done, std::int64_t total)> progress = [](std::int64_t,
                                                                           std::int64_t) {};
  /// On every rank: its own timeline, or null. ppo, a2c, a3c and impala record onto the lanes
  /// "actor" (rollouts, waits for the learner) and "learner" (updates, waits for data).
  Timeline* timeline = nullptr;
};

/// Runs config.algo.name on every rank of `comm`; rank 0's result is the run's.
RunResult run_algorithm(const RlConfig& config, comm::Communicator& comm, const RunHooks& hooks);

RunResult run_policy_gradient(const RlConfig& config, comm::Communicator& comm,
                              const RunHooks& hooks);  // ppo, a2c
RunResult run_a3c(const RlConfig& config, comm::Communicator& comm, const RunHooks& hooks);
RunResult run_impala(const RlConfig& config, comm::Communicator& comm, const RunHooks& hooks);
RunResult run_apex(const RlConfig& config, comm::Communicator& comm,
                   const RunHooks& hooks);  // apex, apex_dpg

}  // namespace distml::rl
