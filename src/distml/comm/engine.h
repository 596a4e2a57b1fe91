// What an engine (mpi, gloo, local) provides to the Communicator: point-to-point transfers
// on two channels, and its own native collectives. Engine headers stay in their folders;
// everything else sees only this interface.
#pragma once

#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "distml/comm/request.h"
#include "distml/comm/types.h"

namespace distml::comm {

/// User point-to-point traffic and the traffic of collectives never match each other.
enum class Channel : std::uint8_t { user, collective };

/// The members of one sub-group after `split`, as computed identically on every rank.
struct SplitGroup {
  int color = 0;
  int key = 0;
  std::vector<int> members;  // parent ranks, in new-rank order
  int new_rank = 0;
  std::uint64_t split_id = 0;  // how many splits the parent did before this one
};

class Engine {
 public:
  virtual ~Engine() = default;
  virtual std::string_view name() const = 0;
  virtual int rank() const = 0;
  virtual int size() const = 0;

  /// Starts a transfer of `bytes` bytes. A receive must get exactly `bytes` bytes, or its
  /// request fails with CommError.
  virtual RequestPtr isend(Channel ch, const void* data, std::size_t bytes, int dst, int tag) = 0;
  virtual RequestPtr irecv(Channel ch, void* data, std::size_t bytes, int src, int tag) = 0;

  // Native collectives: blocking; throw TimeoutError at `deadline`. `op` is never avg (the
  // Communicator sums and divides). Buffers do not alias unless stated.
  virtual void allreduce(Buffer data, ReduceOp op, Deadline deadline) = 0;
  virtual void broadcast(Buffer data, int root, Deadline deadline) = 0;
  /// out holds size() blocks of in.count elements, in rank order.
  virtual void allgather(ConstBuffer in, Buffer out, Deadline deadline) = 0;
  /// out holds counts[r] elements from each rank r, in rank order.
  virtual void allgatherv(ConstBuffer in, Buffer out, std::span<const std::size_t> counts,
                          Deadline deadline) = 0;
  /// in holds size() blocks of out.count elements; rank r gets the reduction of block r.
  virtual void reduce_scatter(ConstBuffer in, Buffer out, ReduceOp op, Deadline deadline) = 0;
  /// in and out hold size() blocks; block j of in goes to rank j, block i of out came from i.
  virtual void alltoall(ConstBuffer in, Buffer out, Deadline deadline) = 0;
  virtual void barrier(Deadline deadline) = 0;

  /// Creates the engine of the sub-group this rank belongs to. Collective over all ranks.
  virtual std::unique_ptr<Engine> split(const SplitGroup& group, Deadline deadline) = 0;
};

}  // namespace distml::comm
