#include "distml/comm/mpi/mpi_engine.h"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <vector>

#include "distml/comm/diagnose.h"
#include "distml/comm/mpi/mpi_request.h"
#include "distml/comm/mpi/mpi_runtime.h"
#include "distml/comm/mpi/mpi_types.h"
#include "distml/comm/mpi/mpi_watchdog.h"
#include "distml/core/error.h"

namespace distml::comm::mpi {
namespace {

bool is_finalized() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  return finalized != 0;
}

std::byte* bytes_at(void* data, std::size_t elements, DType dtype) {
  return static_cast<std::byte*>(data) + elements * dtype_size(dtype);
}
const std::byte* bytes_at(const void* data, std::size_t elements, DType dtype) {
  return static_cast<const std::byte*>(data) + elements * dtype_size(dtype);
}

}  // namespace

MpiEngine::MpiEngine(MPI_Comm user, MPI_Comm collective, const CountLimits& limits)
    : user_(user), collective_(collective), limits_(limits) {
  try {
    for (MPI_Comm c : {user_, collective_})
      check(MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
    check(MPI_Comm_rank(collective_, &rank_), "MPI_Comm_rank");
    check(MPI_Comm_size(collective_, &size_), "MPI_Comm_size");
  } catch (...) {
    MPI_Comm_free(&user_);
    MPI_Comm_free(&collective_);
    throw;
  }
}

// MPI_Comm_free only marks a communicator for deallocation: operations abandoned after a
// timeout keep it alive until they complete. After MPI_Finalize there is nothing to free.
MpiEngine::~MpiEngine() {
  if (is_finalized()) return;
  MPI_Comm_free(&user_);
  MPI_Comm_free(&collective_);
}

RequestPtr MpiEngine::isend(Channel ch, const void* data, std::size_t bytes, int dst, int tag) {
  // MPI only reads a send buffer; the request type serves both directions.
  return std::make_unique<TransferRequest>(true, const_cast<void*>(data), bytes, dst, tag, comm(ch),
                                           limits_);
}

RequestPtr MpiEngine::irecv(Channel ch, void* data, std::size_t bytes, int src, int tag) {
  return std::make_unique<TransferRequest>(false, data, bytes, src, tag, comm(ch), limits_);
}

// Small messages: the blocking MPI_Allreduce under the watchdog (see mpi_watchdog.h); the
// nonblocking form would more than double their latency. Above kBlockingMaxBytes the
// nonblocking form is as fast, and its timeout is an exception the caller can catch.
// Reductions need predefined types (or our own ops), so counts beyond int become several
// operations, all in flight at once.
void MpiEngine::allreduce(Buffer data, ReduceOp op, Deadline deadline) {
  const MPI_Datatype type = mpi_type(data.dtype);
  const MPI_Op reduce = mpi_op(data.dtype, op);
  const std::uint64_t seq = native_seq_++;
  if (data.bytes() <= kBlockingMaxBytes && data.count <= limits_.max_count) {
    const std::function<std::string()> report = [&] {
      return cat("allreduce (mpi engine, ", data.bytes(), " bytes, blocking) on rank ", rank_,
                 " did not complete at its deadline; ",
                 diagnose_missing(*this, seq, kDiagnoseTag, kDiagnoseGrace));
    };
    BlockingGuard guard(deadline, &report);
    check(MPI_Allreduce(MPI_IN_PLACE, data.data, static_cast<int>(data.count), type, reduce,
                        collective_),
          "MPI_Allreduce");
    return;
  }
  PendingCollective pending("allreduce");
  std::size_t done = 0;
  do {
    const std::size_t n = std::min(data.count - done, limits_.max_count);
    pending.posted(MPI_Iallreduce(MPI_IN_PLACE, bytes_at(data.data, done, data.dtype),
                                  static_cast<int>(n), type, reduce, collective_, pending.slot()));
    done += n;
  } while (done < data.count);
  pending.wait(deadline);
}

void MpiEngine::broadcast(Buffer data, int root, Deadline deadline) {
  PendingCollective pending("broadcast");
  auto type = std::make_shared<CountedType>(mpi_type(data.dtype), data.count, limits_);
  pending.keep_alive(type);
  pending.posted(
      MPI_Ibcast(data.data, type->count(), type->type(), root, collective_, pending.slot()));
  pending.wait(deadline);
}

void MpiEngine::allgather(ConstBuffer in, Buffer out, Deadline deadline) {
  PendingCollective pending("allgather");
  auto type = std::make_shared<CountedType>(mpi_type(in.dtype), in.count, limits_);
  pending.keep_alive(type);
  pending.posted(MPI_Iallgather(in.data, type->count(), type->type(), out.data, type->count(),
                                type->type(), collective_, pending.slot()));
  pending.wait(deadline);
}

void MpiEngine::allgatherv(ConstBuffer in, Buffer out, std::span<const std::size_t> counts,
                           Deadline deadline) {
  PendingCollective pending("allgatherv");
  const MPI_Datatype type = mpi_type(in.dtype);
  const std::size_t total = std::accumulate(counts.begin(), counts.end(), std::size_t{0});
  if (total <= limits_.max_count) {  // every count and displacement fits an int
    struct Arrays {
      std::vector<int> counts, displacements;
    };
    auto arrays = std::make_shared<Arrays>();
    int offset = 0;
    for (std::size_t c : counts) {
      arrays->counts.push_back(static_cast<int>(c));
      arrays->displacements.push_back(offset);
      offset += static_cast<int>(c);
    }
    pending.keep_alive(arrays);  // MPI may read them until the operation completes
    pending.posted(MPI_Iallgatherv(in.data, static_cast<int>(in.count), type, out.data,
                                   arrays->counts.data(), arrays->displacements.data(), type,
                                   collective_, pending.slot()));
    pending.wait(deadline);
    return;
  }
  // Displacements beyond int: each rank broadcasts its block into place.
  const std::size_t mine = std::accumulate(counts.begin(), counts.begin() + rank_, std::size_t{0});
  if (in.count) std::memcpy(bytes_at(out.data, mine, out.dtype), in.data, in.bytes());
  auto types = std::make_shared<std::vector<CountedType>>();
  types->reserve(counts.size());
  pending.keep_alive(types);
  std::size_t offset = 0;
  for (int root = 0; root < size_; ++root) {
    const CountedType& t = types->emplace_back(type, counts[root], limits_);
    pending.posted(MPI_Ibcast(bytes_at(out.data, offset, out.dtype), t.count(), t.type(), root,
                              collective_, pending.slot()));
    offset += counts[root];
  }
  pending.wait(deadline);
}

void MpiEngine::reduce_scatter(ConstBuffer in, Buffer out, ReduceOp op, Deadline deadline) {
  PendingCollective pending("reduce_scatter");
  const MPI_Datatype type = mpi_type(out.dtype);
  const MPI_Op reduce = mpi_op(out.dtype, op);
  if (out.count <= limits_.max_count) {
    pending.posted(MPI_Ireduce_scatter_block(in.data, out.data, static_cast<int>(out.count), type,
                                             reduce, collective_, pending.slot()));
    pending.wait(deadline);
    return;
  }
  // Blocks beyond int: block r of every rank is reduced to rank r, in int-sized pieces.
  for (int root = 0; root < size_; ++root) {
    for (std::size_t done = 0; done < out.count;) {
      const std::size_t n = std::min(out.count - done, limits_.max_count);
      const std::byte* src = bytes_at(in.data, root * out.count + done, in.dtype);
      void* dst = root == rank_ ? bytes_at(out.data, done, out.dtype) : nullptr;
      pending.posted(MPI_Ireduce(src, dst, static_cast<int>(n), type, reduce, root, collective_,
                                 pending.slot()));
      done += n;
    }
  }
  pending.wait(deadline);
}

void MpiEngine::alltoall(ConstBuffer in, Buffer out, Deadline deadline) {
  PendingCollective pending("alltoall");
  auto type = std::make_shared<CountedType>(mpi_type(in.dtype), in.count / size_, limits_);
  pending.keep_alive(type);
  pending.posted(MPI_Ialltoall(in.data, type->count(), type->type(), out.data, type->count(),
                               type->type(), collective_, pending.slot()));
  pending.wait(deadline);
}

void MpiEngine::barrier(Deadline deadline) {
  PendingCollective pending("barrier");
  pending.posted(MPI_Ibarrier(collective_, pending.slot()));
  pending.wait(deadline);
}

std::unique_ptr<Engine> MpiEngine::split(const SplitGroup& group, Deadline deadline) {
  {
    PendingCollective pending("split");
    pending.posted(MPI_Ibarrier(collective_, pending.slot()));
    pending.wait(deadline);
  }
  // MPI orders each new group by (key, parent rank), as the Communicator computed it.
  const int color = group.color < 0 ? MPI_UNDEFINED : group.color;
  MPI_Comm user = MPI_COMM_NULL, collective = MPI_COMM_NULL;
  check(MPI_Comm_split(user_, color, group.key, &user), "split: MPI_Comm_split");
  if (int rc = MPI_Comm_split(collective_, color, group.key, &collective); rc != MPI_SUCCESS) {
    if (user != MPI_COMM_NULL) MPI_Comm_free(&user);
    check(rc, "split: MPI_Comm_split");
  }
  if (color == MPI_UNDEFINED) return nullptr;
  auto engine = std::make_unique<MpiEngine>(user, collective, limits_);
  DML_CHECK_EQ(engine->rank(), group.new_rank, "MPI_Comm_split ordered the group differently");
  DML_CHECK_EQ(engine->size(), static_cast<int>(group.members.size()), "sub-group size");
  return engine;
}

}  // namespace distml::comm::mpi
