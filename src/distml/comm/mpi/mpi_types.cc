#include "distml/comm/mpi/mpi_types.h"

#include <vector>

#include "distml/comm/mpi/mpi_runtime.h"
#include "distml/comm/reduce.h"
#include "distml/core/error.h"

namespace distml::comm::mpi {
namespace {

// MPI's `inout = in (op) inout`; all four operations commute, so reduce_into's order is fine.
template <DType T, ReduceOp Op>
void half_reduce(void* in, void* inout, int* len, MPI_Datatype*) {
  reduce_into(inout, in, static_cast<std::size_t>(*len), T, Op);
}

constexpr int kOps = 5;  // ReduceOp values; avg stays unset

struct HalfOps {
  MPI_Op f16[kOps] = {};
  MPI_Op bf16[kOps] = {};
};

template <DType T>
void make_half_ops(MPI_Op (&ops)[kOps]) {
  auto make = [](MPI_User_function* fn) {
    MPI_Op op;
    check(MPI_Op_create(fn, /*commute=*/1, &op), "MPI_Op_create");
    return op;
  };
  ops[static_cast<int>(ReduceOp::sum)] = make(&half_reduce<T, ReduceOp::sum>);
  ops[static_cast<int>(ReduceOp::min)] = make(&half_reduce<T, ReduceOp::min>);
  ops[static_cast<int>(ReduceOp::max)] = make(&half_reduce<T, ReduceOp::max>);
  ops[static_cast<int>(ReduceOp::prod)] = make(&half_reduce<T, ReduceOp::prod>);
}

// Created on first use and kept until MPI_Finalize frees them.
const HalfOps& half_ops() {
  static const HalfOps ops = [] {
    HalfOps h;
    make_half_ops<DType::f16>(h.f16);
    make_half_ops<DType::bf16>(h.bf16);
    return h;
  }();
  return ops;
}

}  // namespace

MPI_Datatype mpi_type(DType dtype) {
  switch (dtype) {
    case DType::f32: return MPI_FLOAT;
    case DType::f64: return MPI_DOUBLE;
    case DType::f16:
    case DType::bf16: return MPI_UINT16_T;
    case DType::i32: return MPI_INT32_T;
    case DType::i64: return MPI_INT64_T;
    case DType::u8: return MPI_UINT8_T;
  }
  DML_CHECK(false, "unknown dtype ", static_cast<int>(dtype));
}

MPI_Op mpi_op(DType dtype, ReduceOp op) {
  DML_CHECK(op != ReduceOp::avg, "avg reaches the engine as sum");
  if (dtype == DType::f16) return half_ops().f16[static_cast<int>(op)];
  if (dtype == DType::bf16) return half_ops().bf16[static_cast<int>(op)];
  switch (op) {
    case ReduceOp::sum: return MPI_SUM;
    case ReduceOp::min: return MPI_MIN;
    case ReduceOp::max: return MPI_MAX;
    case ReduceOp::prod: return MPI_PROD;
    case ReduceOp::avg: break;
  }
  DML_CHECK(false, "unknown reduce op ", static_cast<int>(op));
}

CountedType::CountedType(MPI_Datatype base, std::size_t count, const CountLimits& limits)
    : type_(base), count_(0), derived_(false) {
  if (count <= limits.max_count) {
    count_ = static_cast<int>(count);
    return;
  }
  DML_CHECK(limits.block > 0 && limits.block <= INT_MAX, "bad block size ", limits.block);
  const std::size_t blocks = count / limits.block, rest = count % limits.block;
  DML_CHECK_LE(blocks, static_cast<std::size_t>(INT_MAX), "message too large for MPI");
  MPI_Aint lb = 0, extent = 0;
  check(MPI_Type_get_extent(base, &lb, &extent), "MPI_Type_get_extent");

  std::vector<MPI_Datatype> parts;  // intermediate types, freed once the result is committed
  struct FreeParts {
    std::vector<MPI_Datatype>& parts;
    ~FreeParts() {
      for (auto& t : parts) MPI_Type_free(&t);
    }
  } free_parts{parts};
  auto keep = [&](MPI_Datatype t) {
    parts.push_back(t);
    return t;
  };
  MPI_Datatype block_type, body, whole;
  check(MPI_Type_contiguous(static_cast<int>(limits.block), base, &block_type),
        "MPI_Type_contiguous");
  keep(block_type);
  check(MPI_Type_contiguous(static_cast<int>(blocks), block_type, &body), "MPI_Type_contiguous");
  whole = keep(body);
  if (rest) {
    int lengths[2] = {1, static_cast<int>(rest)};
    MPI_Aint displacements[2] = {0, static_cast<MPI_Aint>(blocks * limits.block) * extent};
    MPI_Datatype types[2] = {body, base};
    check(MPI_Type_create_struct(2, lengths, displacements, types, &whole),
          "MPI_Type_create_struct");
    keep(whole);
  }
  // Pin the extent to the element bytes, so that blocks of collectives sit back to back.
  MPI_Datatype result;
  check(MPI_Type_create_resized(whole, 0, static_cast<MPI_Aint>(count) * extent, &result),
        "MPI_Type_create_resized");
  if (int rc = MPI_Type_commit(&result); rc != MPI_SUCCESS) {
    MPI_Type_free(&result);
    check(rc, "MPI_Type_commit");
  }
  type_ = result;
  count_ = 1;
  derived_ = true;
}

CountedType::~CountedType() {
  if (!derived_) return;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Type_free(&type_);
}

CountedType::CountedType(CountedType&& other) noexcept
    : type_(other.type_), count_(other.count_), derived_(other.derived_) {
  other.derived_ = false;
}

}  // namespace distml::comm::mpi
