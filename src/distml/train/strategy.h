// How replicas of a model stay consistent: the hooks a trainer calls around each step.
// Strategies (all-reduce, local SGD, gossip, ZeRO, ...) implement it, one per file in
// strategies/; strategy_factory.h builds the one a config names.
//
// The trainer's step, with the hooks in order:
//   before_backward(sync) ... forward, backward ...   (once per micro-batch)
//   before_optimizer_step()                           (.grad() now holds what to apply)
//   optimizer_step(optimizer)                         (the update; default: optimizer.step())
//   after_optimizer_step(optimizer, step)             (model averaging, gossip, elastic pull)
// and reconcile(optimizer) before every evaluation, checkpoint and the end of training.
#pragma once

#include <torch/torch.h>

#include <cstdint>

namespace distml::train {

/// What a strategy reports about its communication.
struct StrategyStats {
  std::size_t bytes_sent = 0;      // payload bytes of model data this rank sent, in total (the
                                   // tensors handed to collectives or sends, not wire traffic)
  double comm_seconds = 0;         // last step: from the first launch to the last completion
  double exposed_seconds = 0;      // last step: the part the step waited for after backward
  std::size_t early_launches = 0;  // last step: reductions started while backward still ran
  double overlapped_fraction() const {
    return comm_seconds > 0 ? 1.0 - exposed_seconds / comm_seconds : 0.0;
  }
};

class Strategy {
 public:
  virtual ~Strategy() = default;
  /// Collective, once before training: makes every replica start from the same state.
  virtual void setup(torch::nn::Module& model) = 0;
  /// Called before each backward; `sync` is false on the micro-steps of gradient
  /// accumulation that must not communicate.
  virtual void before_backward(bool sync) = 0;
  /// Called after the last backward of a step: on return, every .grad() holds the gradient
  /// the update applies.
  virtual void before_optimizer_step() = 0;
  /// Applies the update.
  virtual void optimizer_step(torch::optim::Optimizer& optimizer) { optimizer.step(); }
  /// Called after the update of step `step` (1 for the first step of training).
  virtual void after_optimizer_step(torch::optim::Optimizer& /*optimizer*/, std::int64_t /*step*/) {
  }
  /// Collective: on return every replica holds the one model (and optimizer state) the run
  /// stands for (the average for local SGD and gossip, the centre for EASGD), so it can be
  /// evaluated, saved and compared. A no-op where replicas never diverge.
  virtual void reconcile(torch::optim::Optimizer& /*optimizer*/) {}
  virtual StrategyStats stats() const = 0;
};

}  // namespace distml::train
