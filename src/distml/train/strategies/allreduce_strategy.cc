#include "distml/train/strategies/allreduce_strategy.h"

#include <chrono>

#include "distml/core/error.h"
#include "distml/train/bucket_planner.h"
#include "distml/train/strategies/replicas.h"
#include "distml/train/tensor_buffer.h"

namespace distml::train {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

}  // namespace

struct AllreduceStrategy::Bucket {
  std::vector<std::size_t> params;
  std::vector<std::int64_t> offsets;  // element offset of each parameter in `flat`
  torch::Tensor flat;
  std::vector<char> arrived;
  std::size_t pending = 0;  // gradients still to arrive this step
  comm::Work work;
};

AllreduceStrategy::AllreduceStrategy(comm::Communicator& comm, AllreduceStrategyOptions options)
    : comm_(comm), options_(options) {}

// A bucket's flat tensor belongs to its all-reduce until that finishes: wait before freeing.
AllreduceStrategy::~AllreduceStrategy() {
  for (auto& b : buckets_) {
    try {
      b->work.wait();
    } catch (const std::exception&) {  // already reported by whoever saw it first
    }
  }
}

void AllreduceStrategy::setup(torch::nn::Module& model) {
  // 1. Same shapes everywhere, then rank 0's values everywhere.
  auto trainable = start_from_rank0(model, comm_);
  names_ = std::move(trainable.names);
  params_ = std::move(trainable.tensors);

  // 2. Buckets.
  std::vector<std::size_t> bytes;
  for (auto& p : params_) bytes.push_back(p.numel() * p.element_size());
  auto plan = plan_buckets(bytes, options_.first_bucket_bytes, options_.bucket_bytes);
  bucket_of_.assign(params_.size(), 0);
  for (auto& members : plan.buckets) {
    auto b = std::make_unique<Bucket>();
    b->params = members;
    std::int64_t n = 0;
    for (auto k : members) {
      b->offsets.push_back(n);
      n += params_[k].numel();
      if (params_[k].scalar_type() != params_[members[0]].scalar_type())
        throw UsageError("all parameters of a bucket must have one dtype");
      bucket_of_[k] = buckets_.size();
    }
    b->flat = torch::zeros({n}, params_[members[0]].options());
    b->arrived.assign(members.size(), 0);
    b->pending = members.size();
    buckets_.push_back(std::move(b));
  }

  // 3. Hooks.
  for (std::size_t k = 0; k < params_.size(); ++k)
    params_[k].register_hook([this, k](torch::Tensor grad) { on_gradient(k, grad); });
}

void AllreduceStrategy::before_backward(bool sync) { sync_ = sync; }

void AllreduceStrategy::on_gradient(std::size_t k, const torch::Tensor& grad) {
  if (!sync_) return;
  Bucket& b = *buckets_[bucket_of_[k]];
  std::size_t slot = 0;
  while (b.params[slot] != k) ++slot;
  auto dst = b.flat.narrow(0, b.offsets[slot], params_[k].numel());
  torch::NoGradGuard no_grad;
  const auto& acc = params_[k].grad();
  if (acc.defined())
    torch::add_out(dst, acc.reshape(-1), grad.reshape(-1));
  else
    dst.copy_(grad.reshape(-1));
  if (!b.arrived[slot]) {
    b.arrived[slot] = 1;
    --b.pending;
  }
  launch_ready_buckets();
}

// 4. In plan order only, so that all ranks issue the same all-reduces in the same order.
void AllreduceStrategy::launch_ready_buckets() {
  std::size_t launched = 0;
  while (next_launch_ < buckets_.size() && buckets_[next_launch_]->pending == 0) {
    Bucket& b = *buckets_[next_launch_++];
    if (next_launch_ == 1) first_launch_ = std::chrono::steady_clock::now();
    b.work = comm_.iallreduce(buffer_of(b.flat),
                              {.op = comm::ReduceOp::avg, .algorithm = options_.algorithm});
    stats_.bytes_sent += b.flat.numel() * b.flat.element_size();
    ++launched;
  }
  // Launched while a later bucket still waits for gradients: overlapped with backward.
  if (next_launch_ < buckets_.size()) early_launches_ += launched;
}

void AllreduceStrategy::before_optimizer_step() {
  // 5. Parameters that got no gradient.
  for (auto& b : buckets_) {
    if (b->pending == 0) continue;
    for (std::size_t slot = 0; slot < b->params.size(); ++slot) {
      if (b->arrived[slot]) continue;
      const std::size_t k = b->params[slot];
      if (!options_.find_unused_parameters)
        throw Error(cat("parameter '", names_[k],
                        "' got no gradient in this step: every "
                        "parameter must take part in the loss, or set "
                        "find_unused_parameters to send its current gradient (zeros if none)"));
      auto dst = b->flat.narrow(0, b->offsets[slot], params_[k].numel());
      const auto& g = params_[k].grad();
      if (g.defined())
        dst.copy_(g.reshape(-1));
      else
        dst.zero_();
      b->arrived[slot] = 1;
      --b->pending;
    }
  }
  launch_ready_buckets();

  const auto wait_start = Clock::now();
  for (auto& b : buckets_) b->work.wait();
  stats_.exposed_seconds = seconds_since(wait_start);
  stats_.comm_seconds = seconds_since(first_launch_);
  stats_.early_launches = early_launches_;
  early_launches_ = 0;

  torch::NoGradGuard no_grad;
  for (auto& b : buckets_) {
    for (std::size_t slot = 0; slot < b->params.size(); ++slot) {
      auto& p = params_[b->params[slot]];
      auto avg = b->flat.narrow(0, b->offsets[slot], p.numel()).view(p.sizes());
      if (p.grad().defined())
        p.mutable_grad().copy_(avg);
      else
        p.mutable_grad() = avg.clone();
    }
    std::fill(b->arrived.begin(), b->arrived.end(), 0);
    b->pending = b->params.size();
  }
  next_launch_ = 0;
}

}  // namespace distml::train
