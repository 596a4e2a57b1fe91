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
//     all-reduce for all leaves split in one step, in every tree growing side by side: a
//     multi-class round's); the sibling's is the parent's minus it.
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
  // The histogram memory that trees growing side by side may hold (TreeGrower::grow).
  double together_bytes = 64.0 * (1 << 20);
};

/// Which rows and features a tree may use (XGBoost's subsample and colsample_bytree): the
/// same features on every rank, each rank's own rows.
struct TreeSample {
  bool all_rows = true;
  std::vector<std::uint32_t> rows;  // otherwise these local row ids, increasing
  std::vector<bool> features;       // by feature index; empty: all
};

/// One tree to grow: its rows' gradients and hessians (one per local row, already rounded for
/// exact sums), where each row's leaf value is added (outputs[row * stride], every row's,
/// sampled or not), and its sample.
struct TreeTask {
  std::span<const double> gradients, hessians;
  double* outputs = nullptr;
  std::size_t stride = 1;
  TreeSample sample;
};

/// Grows trees on one rank's binned rows. Keeps the row partitions and histograms between trees.
class TreeGrower {
 public:
  /// `bins` is rows x bins.features(), row-major (FeatureBins::bin_rows); both must outlive
  /// the grower.
  TreeGrower(const FeatureBins& bins, const std::vector<std::uint8_t>& binned, std::size_t rows,
             TreeGrowthOptions options);

  /// Collective. Grows the tasks' trees side by side (a multi-class round's K trees): the
  /// histograms every tree needs at a step (the roots', then each split's smaller children's)
  /// go in one all-reduce, instead of one each. Each tree is the one grown alone. As many trees
  /// grow together as their histograms allow within options.together_bytes (one at a time
  /// where one tree's already take more, as on wide tables, and on one rank).
  std::vector<GBDTTree> grow(std::span<const TreeTask> tasks, comm::Communicator& comm);
  /// Bytes of one node's histogram.
  std::size_t histogram_bytes() const { return hist_size_ * sizeof(double); }
  /// Collective. One tree.
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
    std::size_t begin, end;  // this rank's rows: Growth::rows[begin, end)
    int depth;
    double g, h, count;  // global sums
    std::vector<double> hist;
    Split best;
  };
  // A split leaf's two children, before and after their histograms are all-reduced.
  struct Children {
    Leaf left, right;
    bool needs_histograms;
  };
  struct SampledFeature {
    std::uint32_t feature;
    std::size_t first;    // its first histogram entry
    int bins;             // its bins, the missing one included
    std::uint8_t common;  // common_bin_ of it
  };
  // One tree being grown.
  struct Growth {
    const TreeTask* task = nullptr;
    std::vector<std::uint32_t> rows;  // local row ids, grouped by leaf
    std::vector<bool> allowed;        // by active_ index: in the tree's feature sample
    // The allowed features: what build_histogram walks.
    std::vector<SampledFeature> sampled;
    std::vector<int> split_bin;  // by node: the bin each split node splits at
    std::vector<Leaf> leaves;
    std::vector<std::size_t> chosen;  // the leaves being split (indices into leaves)
    std::vector<Children> children;   // theirs
    GBDTTree tree;
  };

  // Trees grown side by side (grow() cuts the tasks into such groups).
  void grow_together(std::span<Growth> growths, comm::Communicator& comm);
  // The task's rows and sample; the root's local histogram appended to batch_.
  void start(Growth& growth);
  // The root from its global histogram at `hist`.
  void finish_root(Growth& growth, const double* hist);
  // The leaves to split next (largest gain first); none when the tree is done.
  void choose(Growth& growth) const;
  // Splits growth.chosen: partitions their rows and appends each split's smaller child's
  // local histogram to batch_.
  void split_chosen(Growth& growth);
  // The children's histograms from their global ones at `*next` (advanced), their best splits.
  void finish_children(Growth& growth, const double*& next);
  // Each leaf's value into the tree and every row's output.
  void finish_tree(Growth& growth);

  // Adds the leaf's rows to `hist` (zeroed): feature by feature, or for a leaf with more rows
  // than that pays for, only each row's entries outside the common bins, whose sums are then the
  // leaf's totals less the other bins' (exact: every partial sum is, see exact_sum.h).
  void build_histogram(const Growth& growth, const Leaf& leaf, double* hist) const;
  void find_best_split(const Growth& growth, Leaf& leaf) const;
  bool may_split(const Leaf& leaf) const;
  double leaf_value(const Leaf& leaf) const;
  // Histograms come from and go back to spare_histograms_: a fresh one of several MB per node
  // would cost a page fault per page each time.
  std::vector<double> take_histogram();
  void recycle(std::vector<double>& histogram);
  // Appends a zeroed histogram to batch_; returns it.
  double* append_to_batch();

  // The leaf a local row falls in, walking the growth's tree on its bins.
  int leaf_of(const Growth& growth, std::uint32_t row) const;

  const FeatureBins& bins_;
  const std::vector<std::uint8_t>& binned_;
  std::size_t rows_count_;
  TreeGrowthOptions options_;
  std::vector<int> active_;          // features with at least two bins or a missing value
  std::vector<std::size_t> offset_;  // first histogram bin of active_[a]
  std::size_t hist_size_ = 0;        // 3 * (bins + a missing bin of active features + 1 for totals)
  // Each active feature's most common bin among this rank's rows (MNIST's: the blank pixels,
  // four in five), and each row's entries in other bins, as histogram offsets (row r's from
  // sparse_begin_[r] to sparse_begin_[r + 1]).
  std::vector<std::uint8_t> common_bin_;
  std::vector<std::size_t> sparse_begin_;
  std::vector<std::uint32_t> sparse_entries_;
  std::vector<Growth> growths_;  // kept between rounds for their rows' memory
  std::vector<std::vector<double>> spare_histograms_;
  std::vector<double> batch_;              // the histograms of one step, all-reduced together
  std::vector<std::uint32_t> right_rows_;  // a split's right rows while it partitions
};

}  // namespace distml::ml
