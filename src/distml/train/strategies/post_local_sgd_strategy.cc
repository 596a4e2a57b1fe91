#include "distml/train/strategies/post_local_sgd_strategy.h"

#include <algorithm>
#include <sstream>

namespace distml::train {

AllreduceStrategyOptions PostLocalSgdStrategy::with(AllreduceStrategyOptions o,
                                                    const compress::CompressOptions& compress) {
  o.compress = compress;
  return o;
}

// The local half counts its steps from the end of the warm-up.
LocalSgdOptions PostLocalSgdStrategy::with(LocalSgdOptions o, compress::CompressOptions compress,
                                           std::int64_t warmup_steps) {
  compress.warmup_steps = std::max<std::int64_t>(0, compress.warmup_steps - warmup_steps);
  o.compress = compress;
  return o;
}

PostLocalSgdStrategy::PostLocalSgdStrategy(comm::Communicator& comm, PostLocalSgdOptions options)
    : warmup_steps_(options.warmup_steps),
      allreduce_(comm, with(options.allreduce, options.compress)),
      local_(comm, with(options.local, options.compress, options.warmup_steps)) {}

void PostLocalSgdStrategy::resumed_at(std::int64_t global_step) {
  steps_done_ = global_step;
  allreduce_.resumed_at(global_step);
  local_.resumed_at(std::max<std::int64_t>(0, global_step - warmup_steps_));
}

std::string PostLocalSgdStrategy::save_state() {
  torch::serialize::OutputArchive archive;
  archive.write("allreduce", allreduce_.save_state());
  archive.write("local", local_.save_state());
  std::ostringstream out;
  archive.save_to(out);
  return out.str();
}

void PostLocalSgdStrategy::load_state(const std::string& state) {
  if (state.empty()) return;
  torch::serialize::InputArchive archive;
  archive.load_from(state.data(), state.size());
  c10::IValue half;
  archive.read("allreduce", half);
  allreduce_.load_state(half.toStringRef());
  archive.read("local", half);
  local_.load_state(half.toStringRef());
}

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
  // The warm-up's last step leaves one model on every replica: local SGD's first compressed
  // average sends the changes from it, not from the model of the first step.
  if (step == warmup_steps_) local_.resumed_at(0);
}

StrategyStats PostLocalSgdStrategy::stats() const {
  StrategyStats s = last_step_local_ ? local_.stats() : allreduce_.stats();
  s.bytes_sent = allreduce_.stats().bytes_sent + local_.stats().bytes_sent;
  s.consensus_distance = local_.stats().consensus_distance;
  return s;
}

}  // namespace distml::train
