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

std::size_t ShardedSampler::steps_after(std::size_t offset) const {
  if (offset >= dataset_size_) return 0;
  const std::size_t global = batch_ * static_cast<std::size_t>(world_size_);
  const std::size_t left = dataset_size_ - offset;
  return drop_last_ ? left / global : (left + global - 1) / global;
}

SamplerPosition ShardedSampler::settled(const SamplerPosition& at) const {
  if (at.step == 0 && at.offset > 0 && steps_after(at.offset) == 0) return {at.epoch + 1, 0};
  return at;
}

std::vector<std::size_t> ShardedSampler::indices(const SamplerPosition& at) const {
  const std::size_t steps = steps_after(at.offset);
  if (at.step >= steps)
    throw UsageError(cat("ShardedSampler: step ", at.step, " >= the epoch's ", steps, " steps",
                         at.offset ? cat(" after offset ", at.offset) : std::string()));
  const std::size_t global = batch_ * static_cast<std::size_t>(world_size_);
  const std::size_t window = at.offset + at.step * global;
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
  const std::vector<std::size_t>& o = order(at.epoch);
  return std::vector<std::size_t>(o.begin() + begin, o.begin() + end);
}

SamplerPosition ShardedSampler::following(const SamplerPosition& at) const {
  SamplerPosition next = at;
  if (++next.step >= steps_after(at.offset)) next = {at.epoch + 1, 0};
  return next;
}

std::size_t ShardedSampler::steps_before_epoch(std::uint64_t epoch) const {
  if (position_.epoch >= epoch) return 0;
  return steps_after(position_.offset) - position_.step +
         static_cast<std::size_t>(epoch - position_.epoch - 1) * steps_;
}

SamplerPosition ShardedSampler::resharded(const SamplerPosition& at, int saved_world_size) const {
  const std::size_t taken =
      at.offset + at.step * batch_ * static_cast<std::size_t>(saved_world_size);
  return settled({at.epoch, 0, std::min(taken, dataset_size_)});
}

std::vector<std::size_t> ShardedSampler::next() {
  std::vector<std::size_t> out = indices(position_);
  position_ = following(position_);
  return out;
}

void ShardedSampler::restore(const SamplerPosition& position) {
  const SamplerPosition at = settled(position);
  const std::size_t steps = steps_after(at.offset);
  if (at.step >= steps)
    throw CheckpointError(cat("ShardedSampler: saved step ", at.step, " >= the epoch's ", steps,
                              " steps (epoch ", at.epoch, ", offset ", at.offset, ")"));
  position_ = at;
}

}  // namespace distml::data
