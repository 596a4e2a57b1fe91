#include "distml/train/strategies/allreduce_strategy.h"

#include <chrono>

#include "distml/core/clock.h"
#include "distml/core/error.h"
#include "distml/train/bucket_planner.h"
#include "distml/train/strategies/replicas.h"
#include "distml/train/tensor_buffer.h"

namespace distml::train {
AllreduceStrategy::AllreduceStrategy(comm::Communicator& comm, AllreduceStrategyOptions options)
    : comm_(comm), options_(options) {}

// A bucket's flat tensor belongs to its all-reduce until that finishes: wait before freeing.
AllreduceStrategy::~AllreduceStrategy() {
  for (auto& work : work_) {
    try {
      work.wait();
    } catch (const std::exception&) {  // already reported by whoever saw it first
    }
  }
}

void AllreduceStrategy::setup(const nn::ModelTensors& model) {
  // 1. Same shapes everywhere, then rank 0's values everywhere.
  auto trainable = start_from_rank0(model, comm_);
  // 2. Buckets; 3. their hooks.
  std::vector<std::size_t> bytes;
  for (auto& p : trainable.tensors) bytes.push_back(p.numel() * p.element_size());
  const auto plan = plan_buckets(bytes, options_.first_bucket_bytes, options_.bucket_bytes);
  work_.resize(plan.buckets.size());
  // Flags, so that a parameter left without a gradient on one rank stops every rank (5.).
  buckets_ = std::make_unique<GradientBuckets>(
      std::move(trainable), plan, 1, [this](std::size_t) { launch_ready_buckets(); },
      /*flags=*/!options_.find_unused_parameters);
  if (options_.compress.name == "none") return;
  const auto& params = buckets_->params();
  for (const auto& bucket : buckets_->buckets()) {
    std::vector<torch::Tensor> tensors;
    for (std::size_t p : bucket.params) tensors.push_back(params[p]);
    layouts_.push_back(compress::layout_of(tensors, options_.compress));
  }
  compressor_ = compress::make_compressor(options_.compress, layouts_);
}

void AllreduceStrategy::before_backward(bool sync) { buckets_->set_sync(sync); }

void AllreduceStrategy::record_into(Timeline* timeline) {
  bucket_lanes_.clear();
  wait_lane_ = lane_of(timeline, "main");
  if (!timeline) return;
  for (std::size_t b = 0; b < work_.size(); ++b)
    bucket_lanes_.push_back(&timeline->lane(cat("bucket ", b)));
  launched_at_.assign(work_.size(), {});
}

// 4. In plan order only, so that all ranks issue the same all-reduces in the same order. The
// last bucket waits for before_optimizer_step: with nothing left to overlap, it is reduced on
// this thread, which spares the communication thread's wake-up (5% of LeNet-5's step at 2
// ranks, whose gradients are one bucket).
void AllreduceStrategy::launch_ready_buckets(bool last_too) {
  if (compressing()) return;
  auto& buckets = buckets_->buckets();
  std::size_t launched = 0;
  while (next_launch_ < buckets.size() && buckets[next_launch_].pending == 0 &&
         (last_too || next_launch_ + 1 < buckets.size())) {
    const std::size_t index = next_launch_++;
    const auto now = Clock::now();
    if (index == 0) first_launch_ = now;
    if (!bucket_lanes_.empty()) launched_at_[index] = now;
    auto& flat = buckets_->flat(index);
    const comm::AllreduceOptions average{.op = comm::ReduceOp::avg,
                                         .algorithm = options_.algorithm};
    if (index + 1 == buckets.size()) {
      comm_.allreduce(buffer_of(flat), average);  // after those queued before it
      work_[index] = {};
    } else {
      work_[index] = comm_.iallreduce(buffer_of(flat), average);
    }
    stats_.bytes_sent += flat.numel() * flat.element_size();
    ++launched;
  }
  // Launched while a later bucket still waits for gradients: overlapped with backward.
  if (next_launch_ < buckets.size() && buckets[next_launch_].pending > 0)
    early_launches_ += launched;
}

void AllreduceStrategy::before_optimizer_step() {
  const auto backward_end = Clock::now();
  // 5. Parameters that got no gradient (launching them now is not overlapped).
  const std::string missing = buckets_->complete_unused(options_.find_unused_parameters);
  const auto wait_start = Clock::now();
  if (compressing()) {
    first_launch_ = wait_start;
    reduce_compressed();
  }
  {
    Span waiting(wait_lane_, "wait");
    launch_ready_buckets(true);
    for (auto& work : work_) work.wait();
  }
  // Each bucket's all-reduce from its launch to its completion, as the queue saw it.
  if (!bucket_lanes_.empty() && !compressing())
    for (std::size_t b = 0; b < work_.size(); ++b)
      bucket_lanes_[b]->add("allreduce", launched_at_[b],
                            work_[b].completed_at().value_or(Clock::now()), "bytes",
                            buckets_->flat(b).numel() * buckets_->flat(b).element_size());
  next_launch_ = 0;
  ++updates_;
  buckets_->throw_if_missing(missing);
  stats_.exposed_seconds = seconds_since(wait_start);
  stats_.comm_seconds = seconds_since(first_launch_);
  stats_.overlapped_seconds = std::max(0.0, seconds_between(first_launch_, backward_end));
  stats_.early_launches = early_launches_;
  early_launches_ = 0;
  for (std::size_t index = 0; index < work_.size(); ++index)
    buckets_->copy_to_grads(index, buckets_->flat(index));
  buckets_->reset();
}

void AllreduceStrategy::reduce_compressed() {
  auto& buckets = buckets_->buckets();
  for (std::size_t b = 0; b < buckets.size(); ++b) {
    const auto grads = buckets_->flat(b).narrow(0, 0, layouts_[b].elements);
    Span span(bucket_lanes_.empty() ? nullptr : bucket_lanes_[b], "compressed allreduce");
    const auto reduced = compressor_->reduce(grads, b, updates_ + 1, comm_);
    grads.copy_(reduced.average);
    stats_.bytes_sent += reduced.bytes_sent;
  }
  if (options_.find_unused_parameters) return;
  // 5.'s flags, one element per bucket, averaged as they would have been with the gradients.
  auto flags = torch::empty({static_cast<std::int64_t>(buckets.size())}, torch::kFloat32);
  for (std::size_t b = 0; b < buckets.size(); ++b) flags[b] = buckets_->flat(b)[buckets[b].flag_at];
  comm_.allreduce(buffer_of(flags), {.op = comm::ReduceOp::avg});
  for (std::size_t b = 0; b < buckets.size(); ++b) buckets_->flat(b)[buckets[b].flag_at] = flags[b];
  stats_.bytes_sent += flags.numel() * flags.element_size();
}

std::string AllreduceStrategy::save_state() {
  return compressor_ ? compressor_->save_state() : std::string();
}

void AllreduceStrategy::load_state(const std::string& state) {
  if (compressor_) compressor_->load_state(state);
}

}  // namespace distml::train
