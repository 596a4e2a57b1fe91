#include "distml/train/pipeline/weight_versions.h"

#include "distml/core/error.h"
#include "distml/core/fnv1a.h"

namespace distml::train::pipeline {

std::vector<torch::Tensor> predicted_weights(const std::vector<torch::Tensor>& weights,
                                             const std::vector<torch::Tensor>& velocity,
                                             int ahead) {
  DML_CHECK(weights.size() == velocity.size(), "a velocity per weight");
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> out;
  for (std::size_t i = 0; i < weights.size(); ++i)
    out.push_back(weights[i].detach() - static_cast<double>(ahead) * velocity[i]);
  return out;
}

WeightVersions::WeightVersions(std::vector<torch::Tensor> params, VelocityFn velocity, bool log)
    : params_(std::move(params)), velocity_(std::move(velocity)), log_(log) {}

void WeightVersions::load(const std::vector<torch::Tensor>& weights) {
  torch::NoGradGuard no_grad;
  for (std::size_t i = 0; i < params_.size(); ++i) params_[i].copy_(weights[i]);
}

std::vector<torch::Tensor> WeightVersions::copy() const {
  std::vector<torch::Tensor> out;
  for (const auto& p : params_) out.push_back(p.detach().clone());
  return out;
}

std::uint64_t WeightVersions::hash() const {
  Fnv1a h;
  for (const auto& p : params_) {
    const auto c = p.detach().contiguous();
    h.mix(c.data_ptr(), static_cast<std::size_t>(c.numel() * c.element_size()));
  }
  return h.value();
}

void WeightVersions::before_forward(int micro, int ahead) {
  if (velocity_) {
    current_ = copy();
    load(predicted_weights(current_, velocity_(), ahead));
  } else {
    stash_[micro] = copy();
  }
  if (log_) open_[micro] = {micro, version_, -1, hash(), 0};
}

void WeightVersions::after_forward(int) {
  if (!velocity_) return;
  load(current_);
  current_.clear();
}

void WeightVersions::before_backward(int micro) {
  if (!velocity_) {
    current_ = copy();
    load(stash_.at(micro));
  }
  if (!log_) return;
  auto& use = open_.at(micro);
  use.backward_version = version_;
  use.backward_hash = hash();
}

void WeightVersions::after_backward(int micro) {
  if (!velocity_) {
    load(current_);
    current_.clear();
    stash_.erase(micro);
  }
  if (!log_) return;
  uses_.push_back(open_.at(micro));
  open_.erase(micro);
}

}  // namespace distml::train::pipeline
