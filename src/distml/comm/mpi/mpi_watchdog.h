// A watchdog for the one blocking MPI call distml makes: small native all-reduces use
// MPI_Allreduce itself, because Open MPI's nonblocking form costs 2-3x its latency at 1 KiB.
// A blocking call cannot be interrupted, so when one is still running at its deadline the
// watchdog thread finds out who did not arrive, prints the TimeoutError and ends the process
// with exit code 1 (as c10d's NCCL watchdog does). Private to comm/mpi/.
#pragma once

#include <functional>
#include <string>

#include "distml/comm/types.h"

namespace distml::comm::mpi {

/// While alive, the calling thread's blocking call is watched. Arming and disarming are two
/// relaxed atomic stores: the watchdog polls every thread's slot ten times a second.
class BlockingGuard {
 public:
  /// `report` runs on the watchdog thread at the deadline and returns the error message
  /// (it may talk to the peers to name the missing ones).
  BlockingGuard(Deadline deadline, const std::function<std::string()>* report);
  ~BlockingGuard();
  BlockingGuard(const BlockingGuard&) = delete;
  BlockingGuard& operator=(const BlockingGuard&) = delete;
};

}  // namespace distml::comm::mpi
