// How replicas of a model stay consistent: the hooks a trainer calls around each step.
// Strategies (all-reduce, parameter server, local SGD, ...) implement it, one per file in
// strategies/.
#pragma once

#include <torch/torch.h>

namespace distml::train {

/// What a strategy reports about its communication.
struct StrategyStats {
  std::size_t bytes_reduced = 0;   // payload bytes this rank contributed, in total
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
  /// Called once before training: makes every replica start from the same state.
  virtual void setup(torch::nn::Module& model) = 0;
  /// Called before each backward; `sync` is false on the micro-steps of gradient
  /// accumulation that must not communicate.
  virtual void before_backward(bool sync) = 0;
  /// Called after the last backward of a step: on return, every .grad() holds the result.
  virtual void before_optimizer_step() = 0;
  virtual StrategyStats stats() const = 0;
};

}  // namespace distml::train
