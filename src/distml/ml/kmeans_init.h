// How KMeans picks its first centres over row-sharded data: k-means|| (the default),
// k-means++ on a gathered sample, and random rows. Every function here is collective (all
// ranks call it with the same arguments) and returns the same k x features centres on
// every rank.
//
// k-means|| (Bahmani et al., "Scalable K-Means++", VLDB 2012), with l = oversampling * k:
//   1. The first candidate is the row at a global index drawn from the seed alone (the same
//      on every rank); its owner contributes it through an allgatherv.
//   2. Each rank keeps, for each of its rows, d² to the nearest candidate and that
//      candidate's index; φ, the global cost, is their all-reduced sum.
//   3. For each of `init_rounds` rounds (stopping early when φ = 0), each rank keeps each of
//      its rows with probability min(1, l d²/φ), drawing from a stream seeded by
//      (seed, rank, round); the kept rows are allgatherv'd to every rank in rank order and
//      become candidates; d² and φ are brought up to date.
//   4. Each candidate is weighted by the number of rows nearest to it (all-reduced counts).
//   5. Every rank reclusters the weighted candidates to k centres with weighted k-means++
//      and weighted Lloyd iterations, from the same seed, so all ranks agree.
// Because step 3 draws per rank, the result is reproducible for a given seed and world size
// but changes with the world size. k-means++ and random draw global row indices from the
// seed alone, so they give the same centres at every world size.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "distml/comm/communicator.h"
#include "distml/data/permutation.h"
#include "distml/ml/local_data.h"

namespace distml::ml {

/// Where each rank's rows sit in the global row order (rank 0's rows first).
class ShardLayout {
 public:
  /// Collective: gathers every rank's row and feature counts. DataError on every rank when
  /// a shard's x does not hold rows x features values, when the ranks disagree on
  /// `features`, or when `global_rows` (if set) is not the sum of the shards' rows.
  static ShardLayout gather(const LocalData& data, comm::Communicator& comm);

  std::size_t global_rows() const { return offsets_.back(); }
  std::size_t begin(int rank) const { return offsets_[rank]; }
  std::size_t end(int rank) const { return offsets_[rank + 1]; }
  int ranks() const { return static_cast<int>(offsets_.size()) - 1; }

 private:
  std::vector<std::size_t> offsets_;  // ranks + 1 entries
};

/// Collective: the rows at `indices` (sorted, distinct global indices) on every rank, in
/// that order, row-major.
std::vector<double> gather_rows(const LocalData& data, const ShardLayout& layout,
                                const std::vector<std::size_t>& indices, comm::Communicator& comm);

/// `count` distinct indices below `n` drawn uniformly (Floyd's algorithm), sorted.
std::vector<std::size_t> sample_indices(std::size_t n, std::size_t count, data::SplitMix64& rng);

/// Rows of the sample that k-means++ runs on: all rows, or max(10k, 2000) of them.
std::size_t plus_plus_sample_size(std::size_t global_rows, std::size_t k);

/// k-means||, steps 1-5 above.
std::vector<double> init_kmeans_parallel(const LocalData& data, const ShardLayout& layout,
                                         comm::Communicator& comm, std::size_t k,
                                         double oversampling, int rounds, std::uint64_t seed);

/// k-means++ on plus_plus_sample_size rows drawn uniformly from all ranks.
std::vector<double> init_kmeans_plus_plus(const LocalData& data, const ShardLayout& layout,
                                          comm::Communicator& comm, std::size_t k,
                                          std::uint64_t seed);

/// k distinct rows drawn uniformly from all ranks.
std::vector<double> init_random(const LocalData& data, const ShardLayout& layout,
                                comm::Communicator& comm, std::size_t k, std::uint64_t seed);

}  // namespace distml::ml
