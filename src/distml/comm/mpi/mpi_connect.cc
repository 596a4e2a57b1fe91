#include "distml/comm/mpi/mpi_connect.h"

#include "distml/comm/mpi/mpi_engine.h"
#include "distml/comm/mpi/mpi_request.h"
#include "distml/comm/mpi/mpi_runtime.h"

namespace distml::comm::mpi {
namespace {

// MPI_Comm_idup rather than MPI_Comm_dup: a rank that never connects gives a timeout here,
// not a hang. MPI writes the new handle when the operation completes, so it lives on the
// heap, kept by the runtime if we stop waiting.
MPI_Comm duplicate_world(Millis timeout) {
  auto comm = std::make_shared<MPI_Comm>(MPI_COMM_NULL);
  PendingCollective pending("MPI_Comm_idup of MPI_COMM_WORLD");
  pending.keep_alive(comm);
  pending.posted(MPI_Comm_idup(MPI_COMM_WORLD, comm.get(), pending.slot()));
  try {
    pending.wait(Deadline::after(timeout));
  } catch (const TimeoutError&) {
    throw TimeoutError(cat("MPI_Comm_idup of MPI_COMM_WORLD did not complete within ",
                           timeout.count(), " ms: not every rank called connect_engine"));
  }
  return *comm;
}

}  // namespace

void initialise(Millis timeout) { ensure_initialised(timeout); }

std::unique_ptr<Engine> connect_engine(Millis timeout) {
  return connect_engine(timeout, CountLimits{});
}

std::unique_ptr<Engine> connect_engine(Millis timeout, const CountLimits& limits) {
  ensure_initialised(timeout);
  MPI_Comm user = duplicate_world(timeout);
  MPI_Comm collective = MPI_COMM_NULL;
  try {
    collective = duplicate_world(timeout);
  } catch (...) {
    MPI_Comm_free(&user);
    throw;
  }
  return std::make_unique<MpiEngine>(user, collective, limits);
}

}  // namespace distml::comm::mpi
