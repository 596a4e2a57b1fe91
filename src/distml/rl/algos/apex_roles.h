// The three roles of Ape-X (Horgan et al. 2018), shared by Ape-X DQN and Ape-X DPG (the agent
// says what differs, apex_agent.h). Rank 0 is the learner, the last rank the prioritised replay,
// the ranks between are actors; with 2 ranks the replay's rank also runs the one actor (in a
// second thread).
//  1. An actor explores, turns its steps into n-step transitions (NStepWindow), computes their
//     initial priorities with its own copy of the networks and sends them to the replay in
//     groups of apex.actor_batch. With apex.env_steps_per_update > 0 the actors together take
//     at most that many steps per learner update (after learning_starts), so that the replay
//     ratio does not depend on how fast this machine's actors run compared with its learner.
//  2. The replay stores them (sum-tree, p^alpha) and answers each of the learner's sample
//     requests with a stratified batch and importance weights (beta from the request), once it
//     holds apex.learning_starts transitions. It also counts the actors' environment steps.
//  3. The learner keeps one request ahead (the replay samples while it trains), trains on each
//     batch, sends the new priorities back and sends its parameters to the actors every
//     apex.param_push updates.
//  4. At the end the learner stops the replay (after its last answer) and the actors; each
//     actor says goodbye to the replay after its last transitions.
// The messages are in apex_messages.h.
#pragma once

#include <vector>

#include "distml/rl/algos/algorithm.h"
#include "distml/rl/algos/apex_agent.h"

namespace distml::rl::apex {

struct Roles {
  int replay;
  std::vector<int> actors;  // in rank order; actor i explores as actor i of actors.size()
  static Roles of(int world);
};

/// The layout of config.env's transitions.
Layout layout_of(const RlConfig& config);

void run_actor(const RlConfig& config, comm::Communicator& comm, int index, const Roles& roles);
void run_replay(const RlConfig& config, comm::Communicator& comm, const RunHooks& hooks,
                const Roles& roles);
RunResult run_learner(const RlConfig& config, comm::Communicator& comm, const RunHooks& hooks,
                      const Roles& roles);

}  // namespace distml::rl::apex
