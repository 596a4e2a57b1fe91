// Which sample indices each rank reads at each step, so that N ranks with batch B together
// see exactly what one rank with batch N*B sees: the basis of "N-rank SGD equals 1-rank SGD
// on the N-times batch".
//
// How an epoch is cut:
//   1. The epoch's global order is shuffled_permutation(dataset_size, seed, epoch).
//   2. Step t owns the window of global positions [t*G, (t+1)*G), G = batch_per_rank * W.
//   3. Rank r takes the contiguous block [r*B, (r+1)*B) of that window, so concatenating the
//      ranks' batches in rank order gives the window, whatever the world size.
//   4. Remainder: with drop_last the last incomplete window is dropped (steps = N / G).
//      Without it there are ceil(N / G) steps and the last window, of R < G positions, is
//      cut with comm::block_range(R, W, r): the first R % W ranks get R / W + 1 indices and
//      the others R / W, which may be 0. Concatenation in rank order is still the window,
//      but ranks' batch sizes then differ, so a trainer must weight by batch size.
//   5. When the world changes in mid-epoch (an elastic restart on fewer or more ranks), resharded()
//      starts a new run of windows where the old one stopped: the epoch's first `offset`
//      global positions are taken, and the windows of the new G follow from there. No sample
//      of the epoch is skipped or repeated; with drop_last only the tail shorter than one new
//      window is dropped, as at any epoch's end.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace distml::data {

/// Where a sampler is in its stream of batches; save it in a checkpoint to resume.
struct SamplerPosition {
  std::uint64_t epoch = 0;
  std::size_t step = 0;
  // Global positions of this epoch taken before its step 0: nonzero only after the world
  // changed in mid-epoch (resharded()).
  std::size_t offset = 0;
  bool operator==(const SamplerPosition&) const = default;
};

/// Deterministic, rank-sharded sampling of a dataset; see the walkthrough above.
/// Not thread-safe: it caches the current epoch's permutation.
class ShardedSampler {
 public:
  /// Throws UsageError when world_size < 1, rank is outside [0, world_size) or
  /// batch_per_rank is 0, and DataError when an epoch would have no step.
  ShardedSampler(std::size_t dataset_size, int world_size, int rank, std::size_t batch_per_rank,
                 std::uint64_t seed, bool drop_last = true);

  /// Number of steps in every epoch (at least 1).
  std::size_t steps_per_epoch() const { return steps_; }
  /// This rank's indices at (epoch, step); step < steps_per_epoch(), else UsageError.
  std::vector<std::size_t> indices(std::uint64_t epoch, std::size_t step) const {
    return indices({epoch, step});
  }
  /// This rank's indices at a position, of an epoch that may start at an offset.
  std::vector<std::size_t> indices(const SamplerPosition& at) const;
  /// The position after `at`: the next step, or the next epoch's first after the last.
  SamplerPosition following(const SamplerPosition& at) const;
  /// Steps from the current position to the start of `epoch` (0 when there already).
  std::size_t steps_before_epoch(std::uint64_t epoch) const;
  /// Where a run of `saved_world_size` ranks at `at` goes on with this sampler's world:
  /// the same epoch, from the first global position it had not taken.
  SamplerPosition resharded(const SamplerPosition& at, int saved_world_size) const;

  /// This rank's indices at the current position, then advances it (to the next epoch
  /// after the last step).
  std::vector<std::size_t> next();
  /// The position the next call to next() reads.
  SamplerPosition position() const { return position_; }
  /// Moves to a saved position; CheckpointError when its step is out of range.
  void restore(const SamplerPosition& position);

  std::size_t dataset_size() const { return dataset_size_; }
  int world_size() const { return world_size_; }
  int rank() const { return rank_; }
  std::size_t batch_per_rank() const { return batch_; }

 private:
  const std::vector<std::size_t>& order(std::uint64_t epoch) const;
  // Steps of an epoch whose first `offset` global positions were taken already.
  std::size_t steps_after(std::size_t offset) const;
  // `at`, or the next epoch's start when no step of `at`'s epoch is left to take.
  SamplerPosition settled(const SamplerPosition& at) const;

  std::size_t dataset_size_;
  int world_size_, rank_;
  std::size_t batch_;
  std::uint64_t seed_;
  bool drop_last_;
  std::size_t steps_ = 0;
  SamplerPosition position_;
  mutable std::uint64_t cached_epoch_ = 0;
  mutable bool cached_ = false;
  mutable std::vector<std::size_t> cached_order_;
};

}  // namespace distml::data
