// Preemption: a scheduler's SIGTERM, or the SIGUSR1 that Slurm sends ahead of a time limit
// (sbatch --signal=USR1@120), asks a run to stop soon. A training run that checkpoints then
// finishes its step, agrees with the other ranks on the step to stop at, writes a checkpoint
// and exits with kPreemptedExitCode, which distml launch and a requeueing batch script read as
// "start again with --resume" (docs/operations.md). A second SIGTERM, 3 s or more after the
// first, ends the process at once.
#pragma once

#include "distml/core/error.h"

namespace distml {

/// sysexits.h's EX_TEMPFAIL: a temporary failure, to be tried again.
inline constexpr int kPreemptedExitCode = 75;

/// Installs the handlers of SIGTERM and SIGUSR1, which only note the request.
void catch_preemption_signals();

/// Whether catch_preemption_signals() was called in this process.
bool preemption_caught();

/// Asks for the stop a SIGUSR1 asks for (the launcher's order to checkpoint:
/// cli/launcher_orders.h).
void request_preemption();

/// Whether SIGTERM or SIGUSR1 (or request_preemption()) has come since.
bool preemption_requested();

/// Thrown by a run that stopped and checkpointed on a preemption; cli/main.cc exits with
/// kPreemptedExitCode.
class Preempted : public Error {
 public:
  using Error::Error;
};

}  // namespace distml
