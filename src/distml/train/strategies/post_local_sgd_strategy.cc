#include "distml/train/strategies/post_local_sgd_strategy.h"

namespace distml::train {

PostLocalSgdStrategy::PostLocalSgdStrategy(comm::Communicator& comm, PostLocalSgdOptions options)
    : warmup_steps_(options.warmup_steps),
      allreduce_(comm, options.allreduce),
      local_(comm, options.local) {}

void PostLocalSgdStrategy::setup(const nn::ModelTensors& model) {
  // 1.
  allreduce_.setup(model);
  local_.setup(model);
}

// 2. and 3.: false switches the all-reduce hooks off after the warm-up.
void PostLocalSgdStrategy::before_backward(bool sync) {
  allreduce_.before_backward(sync && warming_up());
}

void PostLocalSgdStrategy::before_optimizer_step() {
  if (warming_up()) allreduce_.before_optimizer_step();
}

void PostLocalSgdStrategy::after_optimizer_step(torch::optim::Optimizer& optimizer,
                                                std::int64_t step) {
  last_step_local_ = !warming_up();
  steps_done_ = step;
  if (last_step_local_) local_.after_optimizer_step(optimizer, step - warmup_steps_);
}

StrategyStats PostLocalSgdStrategy::stats() const {
  StrategyStats s = last_step_local_ ? local_.stats() : allreduce_.stats();
  s.bytes_sent = allreduce_.stats().bytes_sent + local_.stats().bytes_sent;
  s.consensus_distance = local_.stats().consensus_distance;
  return s;
}

}  // namespace distml::train
