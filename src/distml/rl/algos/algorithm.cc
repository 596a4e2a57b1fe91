#include "distml/rl/algos/algorithm.h"

namespace distml::rl {

RunResult run_algorithm(const RlConfig& config, comm::Communicator& comm, const RunHooks& hooks) {
  const std::string& name = config.algo.name;
  if (name == "ppo" || name == "a2c") return run_policy_gradient(config, comm, hooks);
  if (name == "a3c") return run_a3c(config, comm, hooks);
  if (name == "impala") return run_impala(config, comm, hooks);
  return run_apex(config, comm, hooks);  // the config allows no other name
}

}  // namespace distml::rl
