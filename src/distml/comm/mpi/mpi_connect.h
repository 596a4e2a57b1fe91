// Entry point of the mpi engine; the only mpi/ header other folders may include.
#pragma once

#include <climits>
#include <cstddef>
#include <memory>

#include "distml/comm/engine.h"

namespace distml::comm::mpi {

/// How counts beyond MPI's `int` are carried. A transfer of more than `max_count` elements
/// (bytes, for point-to-point) is described by a derived datatype made of blocks of `block`
/// elements, and a reduction by several operations of at most `max_count` elements each. Tests
/// lower both numbers to run those paths on small buffers; everything else keeps the defaults.
struct CountLimits {
  std::size_t max_count = INT_MAX;
  std::size_t block = std::size_t{1} << 30;
};

/// Initialises MPI (once per process, MPI_THREAD_MULTIPLE, checked) and returns an engine
/// over two duplicates of MPI_COMM_WORLD (one per Channel). Throws TimeoutError if MPI_Init
/// or the duplication does not finish within `timeout` (some rank never started or never
/// connected), CommError if the MPI library lacks the thread level or enough tags.
/// Collective over the world: every rank calls it the same number of times, from one thread.
///
/// MPI is finalised at exit if distml initialised it, unless a failure left operations
/// pending (see mpi_runtime.h): then MPI_Finalize is skipped, because it would wait for
/// ranks that may never arrive, and the process exits with code 1 so that mpirun ends the job.
std::unique_ptr<Engine> connect_engine(Millis timeout);
std::unique_ptr<Engine> connect_engine(Millis timeout, const CountLimits& limits);

/// Initialises MPI as connect_engine does, for code that calls MPI itself (the benchmark's
/// raw-MPI baseline). Does nothing when MPI is already running.
void initialise(Millis timeout);

}  // namespace distml::comm::mpi
