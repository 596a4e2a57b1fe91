// Elastic averaging SGD, synchronous variant (Zhang, Choromanska & LeCun 2015): the replicas
// x_i explore on their own, tied by an elastic force to a centre variable x~ that moves
// towards their average.
//
// The protocol, step by step:
//  1. setup() gives every rank rank 0's parameters and buffers. Every rank keeps its own copy
//     of the centre x~, taken from the parameters at the first step (rank 0's start, or after
//     a resume the checkpoint's model, which reconcile() had made the centre).
//  2. Backward and the optimizer step are local.
//  3. after_optimizer_step(step) with step % tau == 0: mean = the average of the x_i (one
//     all-reduce), then, both from the old values,
//        x_i <- x_i - alpha (x_i - x~)          x~ <- x~ + alpha N (mean - x~).
//     The mean has the same bits on every rank, so the copies of x~ stay bit-identical. With
//     N alpha > 1 the centre would overshoot the mean; the factory refuses that.
//  4. reconcile() gives every rank the centre (parameters := x~, measuring the consensus
//     distance to it first) and averages the optimizer state: evaluations and checkpoints
//     see x~. Training then continues from x_i = x~.
#pragma once

#include <cstdint>
#include <vector>

#include "distml/comm/communicator.h"
#include "distml/train/strategy.h"

namespace distml::train {

struct EasgdOptions {
  std::int64_t period = 8;  // tau: steps between elastic updates
  double alpha = 0.1;       // moving rate; world size x alpha <= 1
};

class EasgdStrategy final : public Strategy {
 public:
  EasgdStrategy(comm::Communicator& comm, EasgdOptions options = {});

  void setup(const nn::ModelTensors& model) override;
  void before_backward(bool sync) override;
  void before_optimizer_step() override {}
  void after_optimizer_step(torch::optim::Optimizer& optimizer, std::int64_t step) override;
  void reconcile(torch::optim::Optimizer& optimizer) override;
  StrategyStats stats() const override { return stats_; }

  /// x~, flat (undefined before the first step).
  const torch::Tensor& centre() const { return centre_; }

 private:
  comm::Communicator& comm_;
  EasgdOptions options_;
  std::vector<torch::Tensor> params_;
  torch::Tensor centre_;
  bool apart_ = false;  // a local step since the last reconcile
  StrategyStats stats_;
};

}  // namespace distml::train
