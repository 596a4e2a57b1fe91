// The c10d backend "distml": PyTorch's ProcessGroup (LibTorch 1.13) over distml's Communicator,
// so that torch.distributed, DDP and ZeroRedundancyOptimizer run on distml's collectives.
//
// Every call starts the operation on the communicator's own thread and returns at once; a
// Work's future completes when the operation has (DDP chains its bucket's work on it).
// Collectives complete in the order they were started, so one thread waits for them in that
// order; point-to-point transfers complete in any order, so another thread polls them.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <vector>

#include "distml/comm/communicator.h"

namespace distml::python {

/// An operation started and what completes its future: `finish` (copies out of a staging
/// buffer) runs once it has succeeded, then the future gets `result`.
struct Pending {
  comm::Work work;
  std::function<void()> finish;
  std::vector<at::Tensor> result;
  c10::intrusive_ptr<c10::ivalue::Future> future;
};

/// Marks futures completed, which runs their callbacks, on threads of its own: a callback may
/// start another operation and wait for its future (PyTorch's PowerSGD hook does, inside
/// `then`), which neither the thread that waits for the operations nor a runner held by that
/// callback could then complete. A runner is added whenever the tasks waiting outnumber the idle
/// runners; runners stay until stop().
class FutureRunners {
 public:
  ~FutureRunners() { stop(); }
  void post(std::function<void()> task);
  /// Returns once every posted task has run and the runners have ended.
  void stop();

 private:
  void run();

  std::mutex mutex_;
  std::condition_variable posted_;
  std::deque<std::function<void()>> tasks_;
  std::vector<std::thread> runners_;
  int idle_ = 0;
  bool stopping_ = false;
};

/// Waits for pending operations on a thread of its own and has their futures completed.
class Completer {
 public:
  /// `in_order`: wait for the oldest first (collectives); else poll all (point-to-point),
  /// each until `timeout` after it was queued.
  Completer(bool in_order, comm::Millis timeout);
  ~Completer();
  void add(Pending p);
  /// Returns once every queued operation has completed or failed, and the thread has ended.
  void stop();

 private:
  struct Queued {
    Pending pending;
    comm::Deadline deadline;
  };
  void run();
  void complete(Queued& q);

  const bool in_order_;
  const comm::Millis timeout_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<Queued> queue_;
  bool stopping_ = false;
  FutureRunners runners_;
  std::thread thread_;
};

class ProcessGroupDistml final : public c10d::ProcessGroup {
 public:
  explicit ProcessGroupDistml(std::unique_ptr<comm::Communicator> comm);
  ~ProcessGroupDistml() override;

  /// The creator torch.distributed calls: rank `rank` of `size` meeting through `store` with
  /// the gloo engine, or the world mpirun started where DISTML_ENGINE=mpi.
  static c10::intrusive_ptr<ProcessGroupDistml> create(const c10::intrusive_ptr<c10d::Store>& store,
                                                       int rank, int size,
                                                       std::chrono::milliseconds timeout);

  const std::string getBackendName() const override { return "distml"; }

  using Tensors = std::vector<at::Tensor>;
  using WorkPtr = c10::intrusive_ptr<c10d::Work>;
  WorkPtr broadcast(Tensors& tensors, const c10d::BroadcastOptions& opts) override;
  WorkPtr allreduce(Tensors& tensors, const c10d::AllreduceOptions& opts) override;
  WorkPtr allreduce_coalesced(Tensors& tensors,
                              const c10d::AllreduceCoalescedOptions& opts) override;
  WorkPtr reduce(Tensors& tensors, const c10d::ReduceOptions& opts) override;
  WorkPtr allgather(std::vector<Tensors>& outputs, Tensors& inputs,
                    const c10d::AllgatherOptions& opts) override;
  WorkPtr _allgather_base(at::Tensor& output, at::Tensor& input,
                          const c10d::AllgatherOptions& opts) override;
  WorkPtr gather(std::vector<Tensors>& outputs, Tensors& inputs,
                 const c10d::GatherOptions& opts) override;
  WorkPtr scatter(Tensors& outputs, std::vector<Tensors>& inputs,
                  const c10d::ScatterOptions& opts) override;
  WorkPtr reduce_scatter(Tensors& outputs, std::vector<Tensors>& inputs,
                         const c10d::ReduceScatterOptions& opts) override;
  WorkPtr _reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                               const c10d::ReduceScatterOptions& opts) override;
  WorkPtr alltoall_base(at::Tensor& output, at::Tensor& input,
                        std::vector<int64_t>& output_split_sizes,
                        std::vector<int64_t>& input_split_sizes,
                        const c10d::AllToAllOptions& opts) override;
  WorkPtr alltoall(Tensors& outputs, Tensors& inputs, const c10d::AllToAllOptions& opts) override;
  WorkPtr send(Tensors& tensors, int dst, int tag) override;
  WorkPtr recv(Tensors& tensors, int src, int tag) override;
  WorkPtr barrier(const c10d::BarrierOptions& opts) override;

 private:
  /// Queues `work` for completion; the returned Work's future holds `result`.
  WorkPtr started(c10d::OpType type, comm::Work work, Tensors result,
                  std::function<void()> finish = {}, bool point_to_point = false);

  std::unique_ptr<comm::Communicator> comm_;
  Completer collectives_;
  Completer transfers_;
};

}  // namespace distml::python
