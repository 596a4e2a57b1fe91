// One regression tree of histogram GBDT and its distributed growth. Every rank holds its own
// rows; all ranks grow the same tree.
//
// Growing (every rank runs the same steps on the same global numbers):
//  1. The caller rounds gradients and hessians with round_for_exact_sums, so every histogram
//     sum below is exact and the same for any world size and order of addition.
//  2. Each rank builds the root's histogram (per feature and bin: sum of gradients, sum of
//     hessians, rows) over its rows; one all-reduce makes it global.
//  3. Every rank finds each leaf's best split from the global histogram: the largest gain
//     G_L^2/(H_L+l2) + G_R^2/(H_R+l2) - G^2/(H+l2) with both sides keeping min_samples_leaf
//     rows (first feature, then missing values right, then first bin, on ties). Rows missing
//     the feature (their own bin) go to the side that gains more, as XGBoost and LightGBM
//     learn a default direction: each threshold is tried with them right and with them left,
//     and "present left, missing right" is a split too. A node whose rows miss nothing sends
//     a missing value to its child with more rows, as scikit-learn does.
//  4. Leaf-wise: the leaf with the largest gain is split. Depthwise: all leaves of the
//     shallowest level, largest gain first. Each rank partitions its rows of a split leaf,
//     builds the histogram of the child with fewer (global) rows and all-reduces it (one
//     all-reduce for all leaves split in one step); the sibling's is the parent's minus it.
//  5. Until max_leaf_nodes leaves or no leaf can be split; a leaf's value is
//     -G / (H + l2) * learning_rate.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "distml/comm/communicator.h"
#include "distml/ml/gbdt_binning.h"

namespace distml::ml {

struct GBDTNode {
  int feature = -1;           // -1 for a leaf
  double gain = 0;            // the split's gain (feature importances)
  double threshold = 0;       // rows with x[feature] <= threshold go left
  bool missing_left = false;  // where a row missing x[feature] (NaN) goes
  int left = -1, right = -1;
  double value = 0;          // a leaf's output, learning rate applied
  std::int64_t samples = 0;  // training rows in the node, over all ranks
  bool is_leaf() const { return feature < 0; }
};

/// Nodes with the root first; children come after their parent.
struct GBDTTree {
  std::vector<GBDTNode> nodes;
  /// The output for one row of raw (unbinned) features; NaN is a missing value.
  double predict(const double* x) const;
};

struct TreeGrowthOptions {
  int max_leaf_nodes = 31;  // 0: no limit
  int max_depth = 0;        // 0: no limit; the root is at depth 0
  bool depthwise = false;
  int min_samples_leaf = 20;
  double min_child_weight = 1e-3;  // least hessian on each side of a split
  double l2_regularization = 0;
  double learning_rate = 0.1;
};

/// Which rows and features a tree may use (XGBoost's subsample and colsample_bytree): the
/// same features on every rank, each rank's own rows.
struct TreeSample {
  bool all_rows = true;
  std::vector<std::uint32_t> rows;  // otherwise these local row ids, increasing
  std::vector<bool> features;       // by feature index; empty: all
};

/// Grows trees on one rank's binned rows. Keeps the row partition and histograms between trees.
class TreeGrower {
 public:
  /// `bins` is rows x bins.features(), row-major (FeatureBins::bin_rows); both must outlive
  /// the grower.
  TreeGrower(const FeatureBins& bins, const std::vector<std::uint8_t>& binned, std::size_t rows,
             TreeGrowthOptions options);

  /// Collective. Grows a tree on gradients and hessians (one per local row, already rounded
  /// for exact sums) of the sampled rows and features, and adds each row's leaf value (every
  /// row's, sampled or not) to outputs[row * stride].
  GBDTTree grow(std::span<const double> gradients, std::span<const double> hessians,
                comm::Communicator& comm, double* outputs, std::size_t stride,
                const TreeSample& sample = {});

 private:
  struct Split {
    double gain = 0;
    int feature = -1;  // index into active_
    int bin = 0;
    bool missing_left = false;
    double g = 0, h = 0, count = 0;  // left side
  };
  struct Leaf {
    int node;
    std::size_t begin, end;  // this rank's rows: rows_[begin, end)
    int depth;
    double g, h, count;  // global sums
    std::vector<double> hist;
    Split best;
  };

  void build_histogram(const Leaf& leaf, std::span<const double> g, std::span<const double> h,
                       double* hist) const;
  void find_best_split(Leaf& leaf) const;
  bool may_split(const Leaf& leaf) const;
  void split_leaves(std::vector<Leaf>& leaves, const std::vector<std::size_t>& chosen,
                    GBDTTree& tree, std::span<const double> g, std::span<const double> h,
                    comm::Communicator& comm);
  double leaf_value(const Leaf& leaf) const;
  // Histograms come from and go back to spare_histograms_: a fresh one of several MB per node
  // would cost a page fault per page each time.
  std::vector<double> take_histogram();
  void recycle(std::vector<double>& histogram);

  // The leaf a local row falls in, walking `tree` on its bins (split_bin_: each node's bin).
  int leaf_of(const GBDTTree& tree, std::uint32_t row) const;

  const FeatureBins& bins_;
  const std::vector<std::uint8_t>& binned_;
  std::size_t rows_count_;
  TreeGrowthOptions options_;
  std::vector<int> active_;          // features with at least two bins or a missing value
  std::vector<std::size_t> offset_;  // first histogram bin of active_[a]
  std::size_t hist_size_ = 0;        // 3 * (bins + a missing bin of active features + 1 for totals)
  std::vector<std::uint32_t> rows_;  // local row ids, grouped by leaf
  std::vector<bool> allowed_;        // by active_ index: in the tree's feature sample
  // The allowed features with the first histogram entry of each: what build_histogram walks.
  std::vector<std::pair<std::uint32_t, std::size_t>> sampled_;
  std::vector<int> split_bin_;  // by node of the tree being grown
  std::vector<std::vector<double>> spare_histograms_;
  std::vector<double> batch_;  // the smaller children's histograms, all-reduced together
};

}  // namespace distml::ml
