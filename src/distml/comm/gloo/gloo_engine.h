// The gloo engine: c10d's ProcessGroupGloo runs the native collectives, PeerMesh the
// point-to-point transfers on connections of its own, and the ring algorithms what c10d 1.13's
// gloo lacks (reduce_scatter, allgather with per-rank counts). Each native collective first
// checks that all ranks passed the same call (agree()); bf16 reductions go through f32.
// Private to comm/gloo/.
#pragma once

#include <memory>
#include <string>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <vector>

#include "distml/comm/engine.h"
#include "distml/comm/gloo/peer_mesh.h"

namespace distml::comm::gloo {

/// ProcessGroupGloo with its gloo context in reach, for the address its connections use.
class GlooGroup final : public c10d::ProcessGroupGloo {
 public:
  using ProcessGroupGloo::ProcessGroupGloo;
  std::shared_ptr<::gloo::Context> context() const { return contexts_.front(); }
};

/// Everything needed to connect one group (the world, or a sub-group after split).
struct GroupSetup {
  c10::intrusive_ptr<c10d::Store> store;  // this group's keys (prefixed for a sub-group)
  int rank = 0;
  int size = 1;
  Millis timeout{0};
  Deadline join_deadline;
  std::shared_ptr<::gloo::transport::Device> device;
  std::shared_ptr<PeerMesh> mesh;  // the world's; made by the world's engine
  std::uint64_t group_id = 0;      // this group's messages on it
  std::vector<int> world_ranks;    // world rank of each group rank, for messages
  std::string what;                // "gloo rendezvous", "gloo split 2 (color 1)"
};

/// An exception's message; c10 errors without their stack trace.
std::string message_of(const std::exception& e);

class GlooEngine final : public Engine {
 public:
  /// Waits until every rank of the group has announced itself in the store (TimeoutError
  /// naming the missing ones at setup.join_deadline), then connects the process group.
  explicit GlooEngine(GroupSetup setup);
  ~GlooEngine() override;

  std::string_view name() const override { return "gloo"; }
  int rank() const override { return setup_.rank; }
  int size() const override { return setup_.size; }

  RequestPtr isend(Channel ch, const void* data, std::size_t bytes, int dst, int tag) override;
  RequestPtr irecv(Channel ch, void* data, std::size_t bytes, int src, int tag) override;

  void allreduce(Buffer data, ReduceOp op, Deadline deadline) override;
  void broadcast(Buffer data, int root, Deadline deadline) override;
  void allgather(ConstBuffer in, Buffer out, Deadline deadline) override;
  void allgatherv(ConstBuffer in, Buffer out, std::span<const std::size_t> counts,
                  Deadline deadline) override;
  void reduce_scatter(ConstBuffer in, Buffer out, ReduceOp op, Deadline deadline) override;
  void alltoall(ConstBuffer in, Buffer out, Deadline deadline) override;
  void barrier(Deadline deadline) override;
  std::unique_ptr<Engine> split(const SplitGroup& group, Deadline deadline) override;

 private:
  /// One small max-allreduce of (kind, count, dtype, root, op) and their negations before
  /// each native collective: gloo aborts the process when ranks pass different sizes
  /// (EnforceNotMet on its device thread, checked here), and throws CommError instead.
  void agree(int kind, std::size_t count, DType dtype, int root, ReduceOp op, Deadline deadline);
  /// Waits for `work` until `deadline`; TimeoutError naming the operation on expiry.
  void finish(const c10::intrusive_ptr<c10d::Work>& work, Deadline deadline, int kind);

  GroupSetup setup_;
  c10::intrusive_ptr<GlooGroup> group_;
  std::vector<std::byte> scratch_;  // for the ring algorithms and the bf16 detour
  bool abandoned_ = false;          // a native collective is still running after a timeout
};

}  // namespace distml::comm::gloo
