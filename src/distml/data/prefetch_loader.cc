#include "distml/data/prefetch_loader.h"

#include <algorithm>
#include <utility>

#include "distml/core/error.h"

namespace distml::data {

PrefetchLoader::PrefetchLoader(const Dataset& dataset, ShardedSampler sampler, std::size_t depth)
    : dataset_(dataset), sampler_(std::move(sampler)), depth_(depth) {
  if (depth_ == 0) throw UsageError("PrefetchLoader: depth is 0, expected >= 1");
  if (sampler_.dataset_size() != dataset_.num_samples)
    throw UsageError(cat("PrefetchLoader: sampler covers ", sampler_.dataset_size(),
                         " samples but the dataset holds ", dataset_.num_samples));
  worker_ = std::thread([this] { run(); });
}

PrefetchLoader::~PrefetchLoader() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  changed_.notify_all();
  worker_.join();
}

Batch PrefetchLoader::assemble(const std::vector<std::size_t>& indices,
                               SamplerPosition position) const {
  const std::size_t dim = dataset_.feature_dim;
  Batch b;
  b.size = indices.size();
  b.feature_dim = dim;
  b.indices = indices;
  b.position = position;
  const bool targets = dataset_.has_float_targets();
  const std::size_t tdim = dataset_.target_dim;
  b.features.resize(b.size * dim);
  if (targets)
    b.targets.resize(b.size * tdim);
  else
    b.labels.resize(b.size);
  for (std::size_t k = 0; k < b.size; ++k) {
    const std::size_t i = indices[k];
    const bool has_y = targets ? (i + 1) * tdim <= dataset_.targets.size()
                               : i < dataset_.labels.size();
    if ((i + 1) * dim > dataset_.features.size() || !has_y)
      throw DataError(cat("PrefetchLoader: sample ", i, " lies outside the dataset's ",
                          dataset_.features.size(), " features and ",
                          targets ? dataset_.targets.size() : dataset_.labels.size(),
                          targets ? " targets" : " labels", " (feature_dim ", dim, ")"));
    std::copy_n(dataset_.row(i), dim, b.features.begin() + k * dim);
    if (targets)
      std::copy_n(dataset_.targets.begin() + i * tdim, tdim, b.targets.begin() + k * tdim);
    else
      b.labels[k] = dataset_.labels[i];
  }
  return b;
}

void PrefetchLoader::push(Item item) {
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [&] { return stop_ || queue_.size() < depth_; });
  if (stop_) return;
  queue_.push_back(std::move(item));
  changed_.notify_all();
}

void PrefetchLoader::run() {
  try {
    for (;;) {
      {
        std::lock_guard<std::mutex> lock(mutex_);
        if (stop_) return;
      }
      const SamplerPosition at = sampler_.position();
      push(Item{assemble(sampler_.next(), at), nullptr});
      if (sampler_.position().step == 0) push(Item{std::nullopt, nullptr});
    }
  } catch (...) {
    push(Item{std::nullopt, std::current_exception()});
  }
}

std::optional<Batch> PrefetchLoader::next() {
  std::unique_lock<std::mutex> lock(mutex_);
  if (error_) std::rethrow_exception(error_);
  changed_.wait(lock, [&] { return !queue_.empty(); });
  Item item = std::move(queue_.front());
  queue_.pop_front();
  changed_.notify_all();
  if (item.error) {
    error_ = item.error;
    std::rethrow_exception(error_);
  }
  return std::move(item.batch);
}

}  // namespace distml::data
