// What every mpi engine test shares: a communicator over the whole mpirun job.
#pragma once

#include <memory>

#include "distml/comm/communicator.h"
#include "distml/comm/mpi/mpi_connect.h"

namespace distml::test {

/// Long enough for four ranks on two cores, short enough that a bug shows up as a
/// TimeoutError well before CTest's limit.
inline comm::CommOptions mpi_test_options() {
  comm::CommOptions o;
  o.timeout = comm::Millis(60'000);
  o.diagnose_grace = comm::Millis(2'000);
  return o;
}

/// A fresh communicator over every rank. Collective: every rank must call it, in every test,
/// also in tests it then skips.
inline std::unique_ptr<comm::Communicator> connect_world(
    const comm::CommOptions& options = mpi_test_options(),
    const comm::mpi::CountLimits& limits = {}) {
  return std::make_unique<comm::Communicator>(comm::mpi::connect_engine(options.timeout, limits),
                                              options);
}

}  // namespace distml::test
