#include "distml/train/strategies/gossip_strategy.h"

#include "distml/core/clock.h"
#include "distml/core/error.h"
#include "distml/train/strategies/replicas.h"
#include "distml/train/tensor_buffer.h"

namespace distml::train {
GossipStrategy::GossipStrategy(comm::Communicator& comm, GossipTopology topology)
    : comm_(comm), offsets_(gossip_offsets(topology, comm.size())) {}

// The buffers belong to their transfers until those finish: wait before freeing.
GossipStrategy::~GossipStrategy() {
  for (auto& w : works_) {
    try {
      w.wait();
    } catch (const std::exception&) {  // already reported by whoever saw it first
    }
  }
}

void GossipStrategy::setup(const nn::ModelTensors& model) {
  // 1.
  params_ = start_from_rank0(model, comm_).tensors;
}

void GossipStrategy::before_backward(bool sync) {
  if (!sync || offsets_.empty()) return;
  // 2.
  DML_CHECK(works_.empty(), "gossip: a step started before the last one's exchange finished");
  launch_ = Clock::now();
  sent_ = flat_copy(params_);
  const int n = comm_.size(), r = comm_.rank();
  received_.clear();
  for (std::size_t k = 0; k < offsets_.size(); ++k) {
    const int d = offsets_[k], tag = kTag + static_cast<int>(k);
    received_.push_back(torch::empty_like(sent_));
    works_.push_back(comm_.irecv(buffer_of(received_.back()), (r - d + n) % n, tag));
    works_.push_back(comm_.isend(buffer_of(sent_), (r + d) % n, tag));
    stats_.bytes_sent += sent_.numel() * sent_.element_size();
  }
}

void GossipStrategy::wait_all() {
  for (auto& w : works_) w.wait();
  works_.clear();
}

void GossipStrategy::after_optimizer_step(torch::optim::Optimizer& /*optimizer*/,
                                          std::int64_t /*step*/) {
  apart_ = true;
  stats_.comm_seconds = stats_.exposed_seconds = 0;
  if (!sent_.defined()) return;  // one rank, or no sync micro-step
  // 4.
  const auto wait_start = Clock::now();
  wait_all();
  stats_.exposed_seconds = seconds_since(wait_start);
  stats_.comm_seconds = seconds_since(launch_);
  torch::NoGradGuard no_grad;
  const double w = 1.0 / static_cast<double>(1 + offsets_.size());
  auto x = flat_copy(params_);
  x.sub_(sent_).add_(sent_, w);  // the step's update + w x_i
  for (auto& y : received_) x.add_(y, w);
  copy_from_flat(x, params_);
  sent_ = torch::Tensor();
}

void GossipStrategy::reconcile(torch::optim::Optimizer& optimizer) {
  // 5.
  if (!apart_) return;
  stats_.bytes_sent += average_across_ranks(params_, comm_, &stats_.consensus_distance);
  stats_.bytes_sent += average_across_ranks(optimizer_state_tensors(optimizer), comm_);
  apart_ = false;
}

}  // namespace distml::train
