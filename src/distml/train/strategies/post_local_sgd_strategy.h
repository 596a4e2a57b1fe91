// Post-local SGD (Lin et al. 2020): synchronous all-reduce SGD for the first warm-up steps,
// while the loss falls fast and replicas that drift would cost most, then local SGD.
//
// The protocol, step by step:
//  1. setup() sets up both halves it is made of: an AllreduceStrategy (its gradient hooks)
//     and a LocalSgdStrategy (both start every rank from rank 0's model).
//  2. Steps 1 .. warmup_steps: every hook goes to the AllreduceStrategy; the replicas stay
//     bit-identical.
//  3. Later steps: the AllreduceStrategy is told before_backward(false) every time, so its
//     hooks do nothing and gradients stay local (as on accumulation micro-steps), and its
//     before_optimizer_step is never called; after_optimizer_step goes to the
//     LocalSgdStrategy with the steps counted from the end of the warm-up, so the first
//     average comes H steps after it.
//  4. reconcile() is the LocalSgdStrategy's: it averages only what drifted, so it costs
//     nothing during the warm-up.
// With compress.name set, both halves compress (the warm-up's gradients, then the changes the
// local phase averages); compress.warmup_steps counts from the start of the run.
// After a resume, resumed_at() tells it which step comes next, so the phase is the same as in
// a run that never stopped.
#pragma once

#include <cstdint>

#include "distml/comm/communicator.h"
#include "distml/train/strategies/allreduce_strategy.h"
#include "distml/train/strategies/local_sgd_strategy.h"
#include "distml/train/strategy.h"

namespace distml::train {

struct PostLocalSgdOptions {
  std::int64_t warmup_steps = 100;  // steps of synchronous SGD before local SGD
  AllreduceStrategyOptions allreduce;
  LocalSgdOptions local;
  compress::CompressOptions compress;
};

class PostLocalSgdStrategy final : public Strategy {
 public:
  PostLocalSgdStrategy(comm::Communicator& comm, PostLocalSgdOptions options = {});

  void setup(const nn::ModelTensors& model) override;
  void before_backward(bool sync) override;
  void before_optimizer_step() override;
  void after_optimizer_step(torch::optim::Optimizer& optimizer, std::int64_t step) override;
  void resumed_at(std::int64_t global_step) override;
  std::string save_state() override;
  void load_state(const std::string& state) override;
  void reconcile(torch::optim::Optimizer& optimizer) override { local_.reconcile(optimizer); }
  void reconcile_for_evaluation(torch::optim::Optimizer& optimizer) override {
    local_.reconcile_for_evaluation(optimizer);
  }
  /// The last step's half; bytes_sent sums both.
  StrategyStats stats() const override;

 private:
  bool warming_up() const { return steps_done_ < warmup_steps_; }

  std::int64_t warmup_steps_;
  static AllreduceStrategyOptions with(AllreduceStrategyOptions o,
                                       const compress::CompressOptions& compress);
  static LocalSgdOptions with(LocalSgdOptions o, compress::CompressOptions compress,
                              std::int64_t warmup_steps);

  AllreduceStrategy allreduce_;
  LocalSgdStrategy local_;
  std::int64_t steps_done_ = 0;  // the last step after_optimizer_step saw
  bool last_step_local_ = false;
};

}  // namespace distml::train
