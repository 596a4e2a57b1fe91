#include "distml/rl/algos/algorithm.h"

#include "distml/core/error.h"

namespace distml::rl {

RunResult run_algorithm(const RlConfig& config, comm::Communicator& comm, const RunHooks& hooks) {
  const std::string& name = config.algo.name;
  if (name == "ppo" || name == "a2c") return run_policy_gradient(config, comm, hooks);
  if (name == "a3c") return run_a3c(config, comm, hooks);
  if (name == "impala") return run_impala(config, comm, hooks);
  if (name == "apex" || name == "apex_dpg") return run_apex(config, comm, hooks);
  // The config's own check refuses other names; a config built in code may still carry one.
  throw UsageError(
      cat("rl: unknown algorithm '", name, "': expected ppo, a2c, a3c, impala, apex or apex_dpg"));
}

}  // namespace distml::rl
