// Ape-X DQN and Ape-X DPG: which rank plays which role (apex_roles.h).
#include <thread>

#include "distml/core/error.h"
#include "distml/rl/algos/algorithm.h"
#include "distml/rl/algos/apex_roles.h"
#include "distml/rl/algos/common.h"

namespace distml::rl {
namespace apex {

Roles Roles::of(int world) {
  Roles r{world - 1, {}};
  if (world == 2) r.actors = {1};
  for (int rank = 1; rank < world - 1; ++rank) r.actors.push_back(rank);
  return r;
}

Layout layout_of(const RlConfig& config) {
  const EnvSpaces& spaces = env_spaces(config.env.name);
  return {spaces.observation.size(), spaces.action.size()};
}

}  // namespace apex

RunResult run_apex(const RlConfig& config, comm::Communicator& comm, const RunHooks& hooks) {
  const std::string& name = config.algo.name;
  if (comm.size() < 2)
    throw UsageError(cat(name, " needs at least 2 ranks (a learner and a replay with actors): --np 2+"));
  if (comm.size() == 2 && comm.engine_name() == "gloo")
    throw UsageError(cat(
        name, " at --np 2 runs its actor beside the replay on rank 1, which needs messages from a "
        "rank to itself; the gloo engine has none: use --np 3 or more, or the mpi or local engine"));
  prepare_rank(config);
  const apex::Roles roles = apex::Roles::of(comm.size());
  if (comm.rank() == 0) return apex::run_learner(config, comm, hooks, roles);
  if (comm.rank() == roles.replay && comm.size() > 2) {
    apex::run_replay(config, comm, hooks, roles);
    return {};
  }
  if (comm.rank() != roles.replay) {
    apex::run_actor(config, comm, comm.rank() - 1, roles);
    return {};
  }
  // Two ranks: the replay and the one actor share rank 1.
  std::exception_ptr actor_error;
  std::thread actor([&] {
    try {
      apex::run_actor(config, comm, 0, roles);
    } catch (...) {
      actor_error = std::current_exception();
    }
  });
  try {
    apex::run_replay(config, comm, hooks, roles);
  } catch (...) {
    actor.detach();  // it fails on its own timeout; the process is ending
    throw;
  }
  actor.join();
  if (actor_error) std::rethrow_exception(actor_error);
  return {};
}

}  // namespace distml::rl
