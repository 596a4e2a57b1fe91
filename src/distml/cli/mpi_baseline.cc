#include "mpi_baseline.h"

#include <mpi.h>

#include <cstdlib>

#include "distml/comm/mpi/mpi_connect.h"
#include "distml/core/error.h"

namespace distml::cli {
namespace {

void check(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  throw CommError(cat("baseline ", what, " failed: ", std::string(text, len)));
}

MPI_Datatype mpi_type(comm::DType t) {
  switch (t) {
    case comm::DType::f32: return MPI_FLOAT;
    case comm::DType::f64: return MPI_DOUBLE;
    case comm::DType::i32: return MPI_INT32_T;
    case comm::DType::i64: return MPI_INT64_T;
    case comm::DType::u8: return MPI_UINT8_T;
    default: return MPI_DATATYPE_NULL;  // no 16-bit float type in MPI
  }
}

}  // namespace

bool mpi_baseline_available() { return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr; }

std::optional<double> time_raw_mpi_collective(const std::string& op, const void* in, void* out,
                                              std::size_t in_count, std::size_t out_count,
                                              comm::DType dtype, int iters) {
  comm::mpi::initialise(comm::Millis(300'000));
  MPI_Datatype type = mpi_type(dtype);
  if (type == MPI_DATATYPE_NULL) return std::nullopt;
  MPI_Comm world = MPI_COMM_WORLD;
  int rank = 0, size = 1;
  MPI_Comm_rank(world, &rank);
  MPI_Comm_size(world, &size);
  const int n = static_cast<int>(in_count), m = static_cast<int>(out_count);
  auto* mut_in = const_cast<void*>(in);
  check(MPI_Barrier(world), "MPI_Barrier");
  double t0 = MPI_Wtime();
  for (int i = 0; i < iters; ++i) {
    int rc = MPI_SUCCESS;
    if (op == "allreduce")
      rc = MPI_Allreduce(MPI_IN_PLACE, mut_in, n, type, MPI_SUM, world);
    else if (op == "broadcast")
      rc = MPI_Bcast(mut_in, n, type, 0, world);
    else if (op == "allgather")
      rc = MPI_Allgather(in, n, type, out, n, type, world);
    else if (op == "reduce_scatter")
      rc = MPI_Reduce_scatter_block(in, out, m, type, MPI_SUM, world);
    else if (op == "alltoall")
      rc = MPI_Alltoall(in, n / size, type, out, n / size, type, world);
    else if (op == "sendrecv")
      rc = MPI_Sendrecv(in, n, type, (rank + 1) % size, 0, out, m, type, (rank + size - 1) % size,
                        0, world, MPI_STATUS_IGNORE);
    else
      throw InternalError(cat("no MPI baseline for ", op));
    check(rc, op.c_str());
  }
  double t = (MPI_Wtime() - t0) / iters;
  check(MPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, world), "MPI_Allreduce");
  return t;
}

}  // namespace distml::cli
