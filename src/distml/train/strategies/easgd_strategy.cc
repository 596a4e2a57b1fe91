#include "distml/train/strategies/easgd_strategy.h"

#include <chrono>

#include "distml/core/error.h"
#include "distml/train/strategies/replicas.h"
#include "distml/train/tensor_buffer.h"

namespace distml::train {

EasgdStrategy::EasgdStrategy(comm::Communicator& comm, EasgdOptions options)
    : comm_(comm), options_(options) {
  if (options_.period < 1)
    throw UsageError(cat("EASGD: period must be >= 1, got ", options_.period));
  if (options_.alpha < 0 || options_.alpha * comm_.size() > 1)
    throw UsageError(cat("EASGD: alpha must be in [0, 1 / world size], got ", options_.alpha,
                         " for ", comm_.size(), " ranks"));
}

void EasgdStrategy::setup(const nn::ModelTensors& model) {
  // 1.
  params_ = start_from_rank0(model, comm_).tensors;
}

// 1. Not in setup(): a resume loads the model after it.
void EasgdStrategy::before_backward(bool /*sync*/) {
  if (!centre_.defined()) centre_ = flat_copy(params_);
}

void EasgdStrategy::after_optimizer_step(torch::optim::Optimizer& /*optimizer*/,
                                         std::int64_t step) {
  // 2.
  apart_ = true;
  stats_.comm_seconds = stats_.exposed_seconds = 0;
  if (step % options_.period != 0) return;
  // 3. Blocking: the whole time is exposed.
  const auto start = std::chrono::steady_clock::now();
  torch::NoGradGuard no_grad;
  auto x = flat_copy(params_);
  auto mean = x.clone();
  comm_.allreduce(buffer_of(mean), {.op = comm::ReduceOp::avg});
  stats_.bytes_sent += payload_bytes(params_);
  auto pull = options_.alpha * (x - centre_);
  centre_.add_(mean - centre_, options_.alpha * comm_.size());
  x.sub_(pull);
  copy_from_flat(x, params_);
  stats_.comm_seconds = stats_.exposed_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

void EasgdStrategy::reconcile(torch::optim::Optimizer& optimizer) {
  // 4.
  if (!apart_) return;
  stats_.consensus_distance = consensus_distance(flat_copy(params_), centre_, comm_);
  copy_from_flat(centre_, params_);
  stats_.bytes_sent += average_across_ranks(optimizer_state_tensors(optimizer), comm_);
  apart_ = false;
}

}  // namespace distml::train
