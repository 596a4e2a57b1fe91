#include "distml/data/sharded_sampler.h"

#include <algorithm>

#include "distml/comm/block_range.h"
#include "distml/core/error.h"
#include "distml/data/permutation.h"

namespace distml::data {

ShardedSampler::ShardedSampler(std::size_t dataset_size, int world_size, int rank,
                               std::size_t batch_per_rank, std::uint64_t seed, bool drop_last)
    : dataset_size_(dataset_size),
      world_size_(world_size),
      rank_(rank),
      batch_(batch_per_rank),
      seed_(seed),
      drop_last_(drop_last) {
  if (world_size < 1) throw UsageError(cat("ShardedSampler: world_size ", world_size, " < 1"));
  if (rank < 0 || rank >= world_size)
    throw UsageError(cat("ShardedSampler: rank ", rank, " outside [0, ", world_size, ")"));
  if (batch_per_rank == 0) throw UsageError("ShardedSampler: batch_per_rank is 0, expected >= 1");
  const std::size_t global = batch_ * static_cast<std::size_t>(world_size_);
  steps_ = drop_last_ ? dataset_size_ / global : (dataset_size_ + global - 1) / global;
  if (steps_ == 0)
    throw DataError(cat("ShardedSampler: dataset of ", dataset_size_,
                        " samples has no step: a global batch is ", batch_, " x ", world_size_,
                        " = ", global, (drop_last_ ? " and drop_last is set" : "")));
}

const std::vector<std::size_t>& ShardedSampler::order(std::uint64_t epoch) const {
  if (!cached_ || cached_epoch_ != epoch) {
    cached_order_ = shuffled_permutation(dataset_size_, seed_, epoch);
    cached_epoch_ = epoch;
    cached_ = true;
  }
  return cached_order_;
}

std::vector<std::size_t> ShardedSampler::indices(std::uint64_t epoch, std::size_t step) const {
  if (step >= steps_)
    throw UsageError(cat("ShardedSampler: step ", step, " >= steps_per_epoch ", steps_));
  const std::size_t global = batch_ * static_cast<std::size_t>(world_size_);
  const std::size_t window = step * global;
  const std::size_t len = std::min(global, dataset_size_ - window);
  std::size_t begin, end;
  if (len == global) {
    begin = window + batch_ * static_cast<std::size_t>(rank_);
    end = begin + batch_;
  } else {
    const comm::BlockRange b = comm::block_range(len, world_size_, rank_);
    begin = window + b.begin;
    end = window + b.end;
  }
  const std::vector<std::size_t>& o = order(epoch);
  return std::vector<std::size_t>(o.begin() + begin, o.begin() + end);
}

std::vector<std::size_t> ShardedSampler::next() {
  std::vector<std::size_t> out = indices(position_.epoch, position_.step);
  if (++position_.step == steps_) {
    position_.step = 0;
    ++position_.epoch;
  }
  return out;
}

void ShardedSampler::restore(const SamplerPosition& position) {
  if (position.step >= steps_)
    throw CheckpointError(cat("ShardedSampler: saved step ", position.step, " >= steps_per_epoch ",
                              steps_, " (epoch ", position.epoch, ")"));
  position_ = position;
}

}  // namespace distml::data
