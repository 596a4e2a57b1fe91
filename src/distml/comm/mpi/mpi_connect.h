// Entry point of the mpi engine; the only mpi/ header other folders may include.
#pragma once

#include <memory>

#include "distml/comm/engine.h"

namespace distml::comm::mpi {

/// Initialises MPI (once per process, MPI_THREAD_MULTIPLE, checked) and returns an engine
/// over a duplicate of MPI_COMM_WORLD. Throws TimeoutError if MPI_Init does not finish
/// within `timeout`, CommError if the MPI library lacks the thread level.
std::unique_ptr<Engine> connect_engine(Millis timeout);

}  // namespace distml::comm::mpi
