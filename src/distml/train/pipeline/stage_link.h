// Tensors between neighbouring pipeline stages: point-to-point with a shape header first, so
// that the receiver needs to know nothing in advance (variable batch sizes, any layer shapes).
#pragma once

#include <torch/torch.h>

#include <string>
#include <vector>

#include "distml/comm/communicator.h"
#include "distml/core/error.h"

namespace distml::train::pipeline {

class StageLink {
 public:
  explicit StageLink(comm::Communicator& comm) : comm_(comm) {}

  /// Sends `t` to `peer` on `tag` without waiting; the tensor is kept until the send has
  /// completed, which the link checks at each send and receive (so that a stage holds only
  /// the sends its neighbours have not taken yet) and a flush waits for. A send
  /// `for_next_step` is one its receiver takes only in its own next step (ddg's delayed
  /// gradients): the next flush leaves it pending and the one after waits for it, so that the
  /// end of a step never waits on a peer's next step.
  void send(const torch::Tensor& t, int peer, int tag, bool for_next_step = false);
  /// Receives the tensor `peer` sent on `tag` (blocking, under the communicator's timeout).
  torch::Tensor recv(int peer, int tag);
  /// Waits until the sends have completed (`all`: those for the next step too); returns the
  /// bytes sent since the last flush.
  std::size_t flush(bool all = false);
  /// The sends not yet completed, whose tensors the link holds.
  std::size_t pending() const { return pending_.size(); }

 private:
  void release_completed();

  struct Pending {
    std::vector<std::int64_t> header;
    torch::Tensor data;
    comm::Work header_work, data_work;
    int flushes_to_skip = 0;  // 1 for a send for the next step
  };
  comm::Communicator& comm_;
  std::vector<Pending> pending_;
  std::size_t bytes_ = 0;
};

/// A stage that died or stalls shows itself to the others only as a wait that does not end:
/// rethrows `e` (a TimeoutError stays one) naming the waiting stage, its world rank and what
/// it waited for.
[[noreturn]] void rethrow_naming(const CommError& e, int stage, int world_rank,
                                 const std::string& waiting);

}  // namespace distml::train::pipeline
