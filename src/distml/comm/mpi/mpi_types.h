// How distml's element types and reductions map to MPI's, and how counts beyond `int` are
// described. Private to comm/mpi/.
#pragma once

#include <mpi.h>

#include <cstddef>

#include "distml/comm/mpi/mpi_connect.h"
#include "distml/comm/types.h"

namespace distml::comm::mpi {

/// The MPI type of one element. f16 and bf16 travel as MPI_UINT16_T.
MPI_Datatype mpi_type(DType dtype);

/// The MPI reduction for `op` on `dtype`. f16 and bf16 get user-defined operations that
/// combine in f32 (as reduce_into does), created once per process. `op` must not be avg.
MPI_Op mpi_op(DType dtype, ReduceOp op);

/// `count` elements of `base` as an MPI (datatype, int count) pair: (base, count) when count
/// fits limits.max_count, else one derived type covering all elements (blocks of
/// limits.block elements, then the remainder), freed with this object. MPI keeps a freed
/// type alive for the operations still using it.
class CountedType {
 public:
  CountedType(MPI_Datatype base, std::size_t count, const CountLimits& limits);
  ~CountedType();
  CountedType(CountedType&& other) noexcept;
  CountedType(const CountedType&) = delete;
  CountedType& operator=(const CountedType&) = delete;
  CountedType& operator=(CountedType&&) = delete;

  MPI_Datatype type() const { return type_; }
  int count() const { return count_; }
  bool derived() const { return derived_; }

 private:
  MPI_Datatype type_;
  int count_;
  bool derived_;
};

}  // namespace distml::comm::mpi
