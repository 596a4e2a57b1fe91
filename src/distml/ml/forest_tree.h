// One tree of a random forest and its distributed growth. Every rank holds its own rows; all
// ranks end with the same tree, whatever the world size.
//
// A node's split is the one that lowers the weighted impurity most (CART): Gini for classes,
// variance for targets. Both are the same formula over per-node sums S of "channels": with
// one channel per class (the weight of that class's rows) the Gini decrease of a split is
// score(left) + score(right) - score(node), score(S) = sum_k S_k^2 / S_w, and with the one
// channel S_y = sum w*y it is the variance decrease. Sums of integer weights (bootstrap counts)
// and of targets rounded for exact sums (exact_sum.h) are exact, so every decision below is the
// same for any world size and order of rows.
//
// Growing, level by level:
//  1. Each node draws its candidate features (max_features of the features that vary) from a
//     seed that only the tree and the node's path from the root decide. When none of them can
//     split the node, it draws the next max_features in the next level, until every feature
//     was tried (scikit-learn keeps drawing past constant features too).
//  2. Large nodes: each rank builds a histogram (per candidate feature and bin: the channels)
//     of its rows; one all-reduce per level makes all of them global; every rank finds the
//     same best split (first candidate, then missing values right, then lowest bin, on ties).
//  3. Small nodes, whose histograms would cost more to all-reduce than their rows: each one's
//     rows go to one rank (the least loaded by weight), which grows the whole subtree alone
//     (sorting its rows per feature when they are fewer than the bins), and the subtrees are
//     then all-gathered. The split rule is the same, so this changes no split.
//  4. A node stays a leaf when it is pure, at max_depth, lighter than 2 * min_samples_leaf, or
//     when no feature can split it. Its value is the class distribution or the mean target.
// Missing values (NaN) have a bin of their own and each split learns their side, as in GBDT.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "distml/comm/communicator.h"
#include "distml/ml/gbdt_binning.h"

namespace distml::ml {

struct ForestNode {
  int feature = -1;  // -1 for a leaf
  double threshold = 0;
  bool missing_left = false;
  int left = -1, right = -1;
  double gain = 0;            // the split's weighted impurity decrease
  double weight = 0;          // the training weight (bootstrap counts) in the node
  std::vector<double> value;  // leaves: class probabilities, or the mean target
  bool is_leaf() const { return feature < 0; }
};

/// Nodes in depth-first order, the root first.
struct ForestTree {
  std::vector<ForestNode> nodes;
  /// The leaf value for one row of raw (unbinned) features; NaN is a missing value.
  const std::vector<double>& predict(const double* x) const;
};

struct ForestGrowth {
  std::size_t classes = 0;  // 0: regression on targets
  int max_depth = 0;        // 0: no limit
  double min_samples_leaf = 1;
  std::size_t max_features = 0;  // candidates per node (0: every feature)
};

/// One rank's rows for one tree: bins of every feature, and per row its class id (or target
/// rounded for exact sums, and its square rounded alike) and its integer weight; rows of
/// weight 0 are not in the tree's sample.
struct ForestRows {
  std::span<const std::uint8_t> binned;  // rows x features, row-major
  std::span<const double> y;
  std::span<const double> y_squared;  // regression only
  std::span<const double> weight;
};

/// Grows the trees of one forest, keeping its buffers from one tree to the next (fresh buffers
/// of the size of the data would cost a page fault per page every tree).
class ForestGrower {
 public:
  ForestGrower(const FeatureBins& bins, const ForestGrowth& growth);
  ~ForestGrower();
  ForestGrower(const ForestGrower&) = delete;
  ForestGrower& operator=(const ForestGrower&) = delete;

  /// Collective. Grows one tree; `seed` decides the features each node draws.
  ForestTree grow(const ForestRows& rows, std::uint64_t seed, comm::Communicator& comm);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace distml::ml
