// The mpi engine: point-to-point and native collectives over two communicators, one per
// Channel, so that user and collective traffic never match. Private to comm/mpi/.
#pragma once

#include <mpi.h>

#include "distml/comm/engine.h"
#include "distml/comm/mpi/mpi_connect.h"
#include "distml/comm/protocol_tags.h"

namespace distml::comm::mpi {

class MpiEngine final : public Engine {
 public:
  /// Takes ownership of both communicators (freed on destruction) and sets MPI_ERRORS_RETURN
  /// on them.
  MpiEngine(MPI_Comm user, MPI_Comm collective, const CountLimits& limits);
  ~MpiEngine() override;
  MpiEngine(const MpiEngine&) = delete;
  MpiEngine& operator=(const MpiEngine&) = delete;

  std::string_view name() const override { return "mpi"; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }

  RequestPtr isend(Channel ch, const void* data, std::size_t bytes, int dst, int tag) override;
  RequestPtr irecv(Channel ch, void* data, std::size_t bytes, int src, int tag) override;

  // Each posts the nonblocking MPI-3 form and polls it until `deadline`; small all-reduces
  // block under the watchdog instead (see allreduce in mpi_engine.cc).
  void allreduce(Buffer data, ReduceOp op, Deadline deadline) override;
  void broadcast(Buffer data, int root, Deadline deadline) override;
  void allgather(ConstBuffer in, Buffer out, Deadline deadline) override;
  void allgatherv(ConstBuffer in, Buffer out, std::span<const std::size_t> counts,
                  Deadline deadline) override;
  void reduce_scatter(ConstBuffer in, Buffer out, ReduceOp op, Deadline deadline) override;
  void alltoall(ConstBuffer in, Buffer out, Deadline deadline) override;
  void barrier(Deadline deadline) override;

  /// A barrier with the deadline first, so that the blocking MPI_Comm_split calls (MPI has
  /// no nonblocking split) find every rank already there.
  std::unique_ptr<Engine> split(const SplitGroup& group, Deadline deadline) override;

 private:
  MPI_Comm comm(Channel ch) const { return ch == Channel::user ? user_ : collective_; }

  // Native all-reduces up to this size use the blocking MPI_Allreduce (see mpi_watchdog.h).
  static constexpr std::size_t kBlockingMaxBytes = 64 << 10;
  // The watchdog's diagnosis: its own tag and listening time.
  static constexpr int kDiagnoseTag = protocol_tag::kEngineDiagnose;
  static constexpr Millis kDiagnoseGrace{3'000};

  MPI_Comm user_, collective_;
  std::uint64_t native_seq_ = 0;  // native all-reduces so far, for the diagnosis
  CountLimits limits_;
  int rank_ = 0, size_ = 1;
};

}  // namespace distml::comm::mpi
