// distml's deep RL from a program of one's own: load a config, register environments of one's
// own (envs/env.h: register_env), and run. `distml rl` wraps the same algorithms with launching,
// progress bars, checkpoints on restart and run directories. examples/rl/own_env.cc shows it.
#pragma once

#include <string>

#include "distml/rl/algos/algorithm.h"
#include "distml/rl/envs/env.h"
#include "distml/rl/rl_config.h"

namespace distml::rl {

struct RunOptions {
  /// "local": the ranks are threads of this process; "mpi" or "gloo": this process is one rank
  /// of a job that `distml launch` (or mpirun, srun) started.
  std::string engine = "local";
  int np = 2;      // ranks of the local engine
  RunHooks hooks;  // the learner's events and progress (default: none)
};

/// Runs `config` over the ranks `options` names, with every blocking operation bounded by
/// run.timeout_s and the ranks' configs compared at start; returns the learner's result (rank
/// 0's: with the local engine, whatever this process; under a launcher, each rank its own).
RunResult run(const RlConfig& config, const RunOptions& options = {});

}  // namespace distml::rl
