#include "distml/train/strategies/gradient_buckets.h"

#include "distml/core/error.h"
#include "distml/train/mapped_memory.h"

namespace distml::train {
namespace {

// A gradient as a flat bucket holds it. A sparse one (an Embedding with sparse=true) is made
// dense: the bucket reduces every element anyway.
torch::Tensor dense_flat(const torch::Tensor& grad) {
  return (grad.is_sparse() ? grad.to_dense() : grad).reshape(-1);
}

}  // namespace

GradientBuckets::GradientBuckets(TrainableParameters params, const BucketPlan& plan,
                                 std::int64_t pad_to, ReadyFn on_ready, bool flags)
    : params_(std::move(params)), on_ready_(std::move(on_ready)), flags_(flags) {
  const auto& tensors = params_.tensors;
  bucket_of_.assign(tensors.size(), 0);
  slot_of_.assign(tensors.size(), 0);
  for (const auto& members : plan.buckets) {
    Bucket b;
    b.params = members;
    for (std::size_t k : members) {
      if (tensors[k].scalar_type() != tensors[members[0]].scalar_type())
        throw UsageError("all parameters of a bucket must have one dtype");
      bucket_of_[k] = buckets_.size();
      slot_of_[k] = b.offsets.size();
      b.offsets.push_back(b.elements);
      b.elements += tensors[k].numel();
    }
    if (flags_) b.flag_at = b.elements++;
    b.elements = (b.elements + pad_to - 1) / pad_to * pad_to;
    b.arrived.assign(members.size(), 0);
    b.pending = members.size();
    buckets_.push_back(std::move(b));
  }
  for (std::size_t k = 0; k < tensors.size(); ++k)
    hooks_.push_back(
        params_.tensors[k].register_hook([this, k](torch::Tensor grad) { on_gradient(k, grad); }));
}

GradientBuckets::~GradientBuckets() {
  for (std::size_t k = 0; k < hooks_.size(); ++k) params_.tensors[k].remove_hook(hooks_[k]);
}

torch::Tensor& GradientBuckets::flat(std::size_t index) {
  Bucket& b = buckets_[index];
  if (!b.flat.defined()) {
    const auto& last = params_.tensors[b.params.back()];
    const std::int64_t used = b.offsets.back() + last.numel();
    b.flat = empty_returned_at_free(b.elements, last.options().requires_grad(false));
    b.flat.narrow(0, used, b.elements - used).zero_();  // the padding
  }
  return b.flat;
}

void GradientBuckets::on_gradient(std::size_t k, const torch::Tensor& grad) {
  if (!sync_) return;
  const std::size_t index = bucket_of_[k], slot = slot_of_[k];
  if (buckets_[index].arrived[slot])
    throw UsageError(cat("parameter '", params_.names[k], "' got a second gradient in one step: ",
                         "its bucket may already be on its way; run one backward per step, or "
                         "accumulate micro-steps without synchronising (train.accumulate)"));
  const auto& p = params_.tensors[k];
  torch::NoGradGuard no_grad;
  auto dst = flat(index).narrow(0, buckets_[index].offsets[slot], p.numel());
  const auto& acc = p.grad();
  if (acc.defined())
    torch::add_out(dst, dense_flat(acc), dense_flat(grad));
  else
    dst.copy_(dense_flat(grad));
  arrived(index, slot);
}

void GradientBuckets::arrived(std::size_t index, std::size_t slot) {
  Bucket& b = buckets_[index];
  if (b.arrived[slot]) return;
  b.arrived[slot] = 1;
  if (--b.pending == 0) on_ready_(index);
}

std::string GradientBuckets::complete_unused(bool send_current) {
  torch::NoGradGuard no_grad;
  std::string first_missing;
  for (std::size_t index = 0; index < buckets_.size(); ++index) {
    Bucket& b = buckets_[index];
    for (std::size_t slot = 0; slot < b.params.size() && b.pending > 0; ++slot) {
      if (b.arrived[slot]) continue;
      const std::size_t k = b.params[slot];
      if (!send_current && !flags_)
        throw Error(cat("parameter '", params_.names[k],
                        "' got no gradient in this step: every parameter must take part in the "
                        "loss, or set find_unused_parameters to send its current gradient "
                        "(zeros if none)"));
      if (!send_current) {
        flat(index)[b.flag_at] = 1;
        if (first_missing.empty()) first_missing = params_.names[k];
      }
      const auto& p = params_.tensors[k];
      auto dst = flat(index).narrow(0, b.offsets[slot], p.numel());
      if (p.grad().defined())
        dst.copy_(dense_flat(p.grad()));
      else
        dst.zero_();
      arrived(index, slot);
    }
  }
  return first_missing;
}

void GradientBuckets::throw_if_missing(const std::string& missing_here) {
  for (std::size_t index = 0; index < buckets_.size(); ++index)
    if (buckets_[index].flat.defined()) throw_if_missing(index, missing_here);
}

void GradientBuckets::throw_if_missing(std::size_t index, const std::string& missing_here) {
  if (!flag_raised(index)) return;
  reset();
  throw Error(cat(
      missing_here.empty()
          ? cat("a parameter of bucket ", index, " got no gradient on another rank in this step")
          : "parameter '" + missing_here + "' got no gradient in this step",
      ": every parameter must take part in the loss on every rank, or set "
      "find_unused_parameters to send its current gradient (zeros if none)"));
}

void GradientBuckets::reset() {
  for (Bucket& b : buckets_) {
    std::fill(b.arrived.begin(), b.arrived.end(), 0);
    b.pending = b.params.size();
    if (b.flag_at >= 0 && b.flat.defined()) b.flat[b.flag_at].zero_();
  }
}

void GradientBuckets::copy_to_grads(std::size_t index, const torch::Tensor& values) {
  torch::NoGradGuard no_grad;
  const Bucket& b = buckets_[index];
  for (std::size_t slot = 0; slot < b.params.size(); ++slot) {
    auto& p = params_.tensors[b.params[slot]];
    auto v = values.narrow(0, b.offsets[slot], p.numel()).view(p.sizes());
    if (p.grad().defined() && !p.grad().is_sparse())
      p.mutable_grad().copy_(v);
    else
      p.mutable_grad() = v.clone();
  }
}

void GradientBuckets::copy_to_params(std::size_t index, const torch::Tensor& values) {
  torch::NoGradGuard no_grad;
  const Bucket& b = buckets_[index];
  for (std::size_t slot = 0; slot < b.params.size(); ++slot) {
    auto& p = params_.tensors[b.params[slot]];
    p.copy_(values.narrow(0, b.offsets[slot], p.numel()).view(p.sizes()));
  }
}

}  // namespace distml::train
