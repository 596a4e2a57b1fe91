// Raw MPI collectives on MPI_COMM_WORLD: the baseline `distml bench` runs beside distml on
// the same buffers in the same job.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

#include "distml/comm/types.h"

namespace distml::cli {

/// True when this process was started by mpirun (MPI is then initialised on first use).
bool mpi_baseline_available();

/// Seconds per call on the slowest rank, over `iters` calls of the raw MPI collective that
/// corresponds to `op` ("allreduce" -> MPI_Allreduce, "sendrecv" -> MPI_Sendrecv ring, ...);
/// nullopt for dtypes MPI has no type for (f16, bf16).
std::optional<double> time_raw_mpi_collective(const std::string& op, const void* in, void* out,
                                              std::size_t in_count, std::size_t out_count,
                                              comm::DType dtype, int iters);

}  // namespace distml::cli
