// Assembles this rank's batches on a background thread so that reading and copying samples
// overlaps the training step. The worker runs ahead of next() by at most `depth` items.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "distml/data/dataset.h"
#include "distml/data/sharded_sampler.h"

namespace distml::data {

/// One rank's batch: features row-major [size x feature_dim], and labels [size] or targets
/// [size x target_dim], as the dataset has them.
struct Batch {
  std::size_t size = 0;
  std::size_t feature_dim = 0;
  std::vector<float> features;
  std::vector<std::int64_t> labels;
  std::vector<float> targets;
  std::vector<std::size_t> indices;  // dataset rows, in batch order
  SamplerPosition position;          // where the sampler was before this batch
};

/// Batches for `sampler` over `dataset`, prefetched into a queue of `depth` items.
/// The dataset must outlive the loader. next() is for one consumer thread.
class PrefetchLoader {
 public:
  /// Starts the worker at the sampler's current position. UsageError when depth is 0 or
  /// the sampler's dataset size differs from the dataset's.
  PrefetchLoader(const Dataset& dataset, ShardedSampler sampler, std::size_t depth = 2);
  /// Stops the worker, even one blocked on a full queue, and joins it.
  ~PrefetchLoader();
  PrefetchLoader(const PrefetchLoader&) = delete;
  PrefetchLoader& operator=(const PrefetchLoader&) = delete;

  /// The next batch, or nullopt once after the last batch of each epoch (the call after
  /// that returns the first batch of the next epoch). Rethrows an exception the worker hit
  /// while assembling a batch, on this and every later call.
  std::optional<Batch> next();

 private:
  struct Item {
    std::optional<Batch> batch;  // nullopt: end of epoch
    std::exception_ptr error;
  };
  void run();
  Batch assemble(const std::vector<std::size_t>& indices, SamplerPosition position) const;
  void push(Item item);

  const Dataset& dataset_;
  ShardedSampler sampler_;
  std::size_t depth_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<Item> queue_;
  bool stop_ = false;
  std::exception_ptr error_;
  std::thread worker_;  // last: starts after every other member is built
};

}  // namespace distml::data
