#include "distml/train/strategies/local_sgd_strategy.h"

#include <chrono>

#include "distml/core/error.h"
#include "distml/train/strategies/replicas.h"

namespace distml::train {

LocalSgdStrategy::LocalSgdStrategy(comm::Communicator& comm, LocalSgdOptions options)
    : comm_(comm), options_(options) {
  if (options_.period < 1)
    throw UsageError(cat("local SGD: period must be >= 1, got ", options_.period));
}

void LocalSgdStrategy::setup(const nn::ModelTensors& model) {
  // 1.
  params_ = start_from_rank0(model, comm_).tensors;
}

void LocalSgdStrategy::after_optimizer_step(torch::optim::Optimizer& optimizer, std::int64_t step) {
  // 2. The step was local.
  params_apart_ = state_apart_ = true;
  stats_.comm_seconds = stats_.exposed_seconds = 0;
  if (step % options_.period != 0) return;
  // 3. Blocking: the whole time is exposed.
  const auto start = std::chrono::steady_clock::now();
  average_parameters();
  if (options_.average_optimizer_state) average_optimizer_state(optimizer);
  stats_.comm_seconds = stats_.exposed_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

void LocalSgdStrategy::reconcile(torch::optim::Optimizer& optimizer) {
  // 4.
  if (params_apart_) average_parameters(&stats_.consensus_distance);
  if (state_apart_) average_optimizer_state(optimizer);
}

void LocalSgdStrategy::average_parameters(double* distance) {
  stats_.bytes_sent += average_across_ranks(params_, comm_, distance);
  params_apart_ = false;
}

void LocalSgdStrategy::average_optimizer_state(torch::optim::Optimizer& optimizer) {
  stats_.bytes_sent += average_across_ranks(optimizer_state_tensors(optimizer), comm_);
  state_apart_ = false;
}

}  // namespace distml::train
