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
  if (options_.compress.name == "none") return;
  compressor_ = compress::make_compressor(options_.compress,
                                          {compress::layout_of(params_, options_.compress)});
  anchor_ = flat_copy(params_);
}

// A resumed model is an average: the anchor of the next change.
void LocalSgdStrategy::resumed_at(std::int64_t global_step) {
  steps_ = global_step;
  if (compressor_) anchor_ = flat_copy(params_);
}

std::string LocalSgdStrategy::save_state() {
  return compressor_ ? compressor_->save_state() : std::string();
}

void LocalSgdStrategy::load_state(const std::string& state) {
  if (compressor_) compressor_->load_state(state);
}

void LocalSgdStrategy::after_optimizer_step(torch::optim::Optimizer& optimizer, std::int64_t step) {
  // 2. The step was local.
  ++steps_;
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

// 4. The replicas' exact mean of whatever drifted since its last average.
void LocalSgdStrategy::average_what_drifted(torch::optim::Optimizer& optimizer) {
  if (params_apart_)
    stats_.bytes_sent += average_across_ranks(params_, comm_, &stats_.consensus_distance);
  if (state_apart_)
    stats_.bytes_sent += average_across_ranks(optimizer_state_tensors(optimizer), comm_);
}

void LocalSgdStrategy::reconcile(torch::optim::Optimizer& optimizer) {
  average_what_drifted(optimizer);
  if (compressor_ && params_apart_) anchor_ = flat_copy(params_);  // each change delivered whole
  params_apart_ = state_apart_ = false;
}

void LocalSgdStrategy::reconcile_for_evaluation(torch::optim::Optimizer& optimizer) {
  average_what_drifted(optimizer);
}

void LocalSgdStrategy::average_parameters() {
  if (compressor_ && steps_ > options_.compress.warmup_steps) {
    average_compressed();
  } else {
    stats_.bytes_sent += average_across_ranks(params_, comm_);
    if (compressor_) anchor_ = flat_copy(params_);
  }
  params_apart_ = false;
}

void LocalSgdStrategy::average_compressed() {
  const auto own = flat_copy(params_);
  const auto reduced = compressor_->reduce(own - anchor_, 0, steps_, comm_);
  anchor_ += reduced.average;
  copy_from_flat(anchor_, params_);
  stats_.bytes_sent += reduced.bytes_sent;
}

void LocalSgdStrategy::average_optimizer_state(torch::optim::Optimizer& optimizer) {
  stats_.bytes_sent += average_across_ranks(optimizer_state_tensors(optimizer), comm_);
  state_apart_ = false;
}

}  // namespace distml::train
