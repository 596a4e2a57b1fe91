// Tensors between neighbouring pipeline stages: point-to-point with a shape header first, so
// that the receiver needs to know nothing in advance (variable batch sizes, any layer shapes).
#pragma once

#include <torch/torch.h>

#include <vector>

#include "distml/comm/communicator.h"

namespace distml::train::pipeline {

class StageLink {
 public:
  explicit StageLink(comm::Communicator& comm) : comm_(comm) {}

  /// Sends `t` to `peer` on `tag` without waiting; the tensor is kept until flush().
  void send(const torch::Tensor& t, int peer, int tag);
  /// Receives the tensor `peer` sent on `tag` (blocking, under the communicator's timeout).
  torch::Tensor recv(int peer, int tag);
  /// Waits until every send has completed; returns the bytes sent since the last flush.
  std::size_t flush();

 private:
  struct Pending {
    std::vector<std::int64_t> header;
    torch::Tensor data;
    comm::Work header_work, data_work;
  };
  comm::Communicator& comm_;
  std::vector<Pending> pending_;
  std::size_t bytes_ = 0;
};

}  // namespace distml::train::pipeline
