#include "distml/ml/gbdt_tree.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "distml/core/error.h"

namespace distml::ml {
namespace {}  // namespace

double GBDTTree::predict(const double* x) const {
  int n = 0;
  while (!nodes[n].is_leaf()) {
    const GBDTNode& node = nodes[n];
    const double v = x[node.feature];
    const bool left = std::isnan(v) ? node.missing_left : v <= node.threshold;
    n = left ? node.left : node.right;
  }
  return nodes[n].value;
}

TreeGrower::TreeGrower(const FeatureBins& bins, const std::vector<std::uint8_t>& binned,
                       std::size_t rows, TreeGrowthOptions options)
    : bins_(bins), binned_(binned), rows_count_(rows), options_(options) {
  DML_CHECK_EQ(binned.size(), rows * bins.features(), "binned rows");
  std::size_t bins_so_far = 0;
  for (std::size_t f = 0; f < bins.features(); ++f) {
    if (bins.bins(f) < 2 && !bins.has_missing(f)) continue;
    active_.push_back(static_cast<int>(f));
    offset_.push_back(bins_so_far);
    bins_so_far += static_cast<std::size_t>(bins.bins(f)) + 1;  // and the missing bin
  }
  hist_size_ = 3 * (bins_so_far + 1);
}

void TreeGrower::build_histogram(const Leaf& leaf, std::span<const double> g,
                                 std::span<const double> h, double* hist) const {
  std::fill(hist, hist + hist_size_, 0.0);
  const std::size_t features = bins_.features();
  double* totals = hist + hist_size_ - 3;
  for (std::size_t p = leaf.begin; p < leaf.end; ++p) {
    const std::uint32_t r = rows_[p];
    const std::uint8_t* b = binned_.data() + r * features;
    const double gr = g[r], hr = h[r];
    for (const auto& [f, first] : sampled_) {
      double* e = hist + first + 3 * b[f];
      e[0] += gr;
      e[1] += hr;
      e[2] += 1;
    }
    totals[0] += gr;
    totals[1] += hr;
    totals[2] += 1;
  }
}

bool TreeGrower::may_split(const Leaf& leaf) const {
  return leaf.count >= 2.0 * options_.min_samples_leaf && leaf.h >= 2 * options_.min_child_weight &&
         (options_.max_depth == 0 || leaf.depth < options_.max_depth) && !active_.empty();
}

void TreeGrower::find_best_split(Leaf& leaf) const {
  leaf.best = {};
  if (!may_split(leaf)) return;
  const double l2 = options_.l2_regularization;
  const double min_rows = options_.min_samples_leaf;
  const double parent = leaf.g * leaf.g / (leaf.h + l2);
  for (std::size_t a = 0; a < active_.size(); ++a) {
    if (!allowed_[a]) continue;
    const int bins = bins_.bins(static_cast<std::size_t>(active_[a]));
    const double* e = leaf.hist.data() + 3 * offset_[a];
    const double* missing = e + 3 * bins;
    for (const bool missing_left : {false, true}) {
      if (missing_left && missing[2] == 0) break;  // the same splits again
      double gl = missing_left ? missing[0] : 0, hl = missing_left ? missing[1] : 0,
             cl = missing_left ? missing[2] : 0;
      // b = bins - 1 puts every present value left: a split only when the missing go right.
      for (int b = 0; b < bins; ++b) {
        gl += e[3 * b];
        hl += e[3 * b + 1];
        cl += e[3 * b + 2];
        if (cl < min_rows) continue;
        if (leaf.count - cl < min_rows) break;
        const double hr = leaf.h - hl, gr = leaf.g - gl;
        if (hl < options_.min_child_weight || hr < options_.min_child_weight) continue;
        const double gain = gl * gl / (hl + l2) + gr * gr / (hr + l2) - parent;
        if (gain > leaf.best.gain)
          leaf.best = {gain, static_cast<int>(a), b, missing_left, gl, hl, cl};
      }
    }
    if (leaf.best.feature == static_cast<int>(a) && missing[2] == 0)
      leaf.best.missing_left = 2 * leaf.best.count >= leaf.count;  // the larger child
  }
}

double TreeGrower::leaf_value(const Leaf& leaf) const {
  const double denominator = leaf.h + options_.l2_regularization;
  return denominator > 0 ? -leaf.g / denominator * options_.learning_rate : 0.0;
}

void TreeGrower::split_leaves(std::vector<Leaf>& leaves, const std::vector<std::size_t>& chosen,
                              GBDTTree& tree, std::span<const double> g, std::span<const double> h,
                              comm::Communicator& comm) {
  const std::size_t features = bins_.features();
  struct Pair {
    Leaf left, right;
    bool needs_histograms;
  };
  std::vector<Pair> pairs;
  std::vector<double>& smaller_hists = batch_;
  smaller_hists.clear();
  for (std::size_t i : chosen) {
    Leaf& parent = leaves[i];
    const Split s = parent.best;
    const int f = active_[s.feature];
    const auto& edges = bins_.edges(static_cast<std::size_t>(f));
    const std::uint8_t missing = bins_.missing_bin(static_cast<std::size_t>(f));
    const auto mid = std::stable_partition(rows_.begin() + parent.begin, rows_.begin() + parent.end,
                                           [&](std::uint32_t r) {
                                             const std::uint8_t b = binned_[r * features + f];
                                             return b == missing ? s.missing_left : b <= s.bin;
                                           });
    const auto mid_index = static_cast<std::size_t>(mid - rows_.begin());
    const int left_node = static_cast<int>(tree.nodes.size());
    GBDTNode& node = tree.nodes[parent.node];
    node.feature = f;
    // Past the last edge every present value goes left (JSON has no infinity).
    node.threshold = static_cast<std::size_t>(s.bin) < edges.size()
                         ? edges[s.bin]
                         : std::numeric_limits<double>::max();
    node.missing_left = s.missing_left;
    node.gain = s.gain;
    split_bin_[static_cast<std::size_t>(parent.node)] = s.bin;
    node.left = left_node;
    node.right = left_node + 1;
    Pair p{{left_node, parent.begin, mid_index, parent.depth + 1, s.g, s.h, s.count, {}, {}},
           {left_node + 1,
            mid_index,
            parent.end,
            parent.depth + 1,
            parent.g - s.g,
            parent.h - s.h,
            parent.count - s.count,
            {},
            {}},
           false};
    tree.nodes.push_back({.samples = static_cast<std::int64_t>(p.left.count)});
    tree.nodes.push_back({.samples = static_cast<std::int64_t>(p.right.count)});
    split_bin_.resize(tree.nodes.size(), -1);
    p.needs_histograms = may_split(p.left) || may_split(p.right);
    if (p.needs_histograms) {
      const Leaf& smaller = p.left.count <= p.right.count ? p.left : p.right;
      smaller_hists.resize(smaller_hists.size() + hist_size_);
      build_histogram(smaller, g, h, smaller_hists.data() + smaller_hists.size() - hist_size_);
    }
    pairs.push_back(std::move(p));
  }
  if (!smaller_hists.empty()) comm.allreduce(comm::view(smaller_hists));

  std::size_t slot = 0;
  for (std::size_t k = 0; k < chosen.size(); ++k) {
    Pair& p = pairs[k];
    Leaf& parent = leaves[chosen[k]];
    if (p.needs_histograms) {
      const bool left_smaller = p.left.count <= p.right.count;
      Leaf& smaller = left_smaller ? p.left : p.right;
      Leaf& larger = left_smaller ? p.right : p.left;
      const double* s = smaller_hists.data() + slot * hist_size_;
      ++slot;
      smaller.hist = take_histogram();
      std::copy_n(s, hist_size_, smaller.hist.data());
      larger.hist = std::move(parent.hist);
      for (std::size_t j = 0; j < hist_size_; ++j) larger.hist[j] -= s[j];
      find_best_split(p.left);
      find_best_split(p.right);
      for (Leaf* c : {&p.left, &p.right})
        if (c->best.feature < 0) recycle(c->hist);
    }
    recycle(parent.hist);
    leaves[chosen[k]] = std::move(p.left);
  }
  for (auto& p : pairs) leaves.push_back(std::move(p.right));
}

std::vector<double> TreeGrower::take_histogram() {
  if (spare_histograms_.empty()) return std::vector<double>(hist_size_);
  std::vector<double> h = std::move(spare_histograms_.back());
  spare_histograms_.pop_back();
  return h;
}

void TreeGrower::recycle(std::vector<double>& histogram) {
  if (!histogram.empty()) spare_histograms_.push_back(std::move(histogram));
  histogram = {};
}

int TreeGrower::leaf_of(const GBDTTree& tree, std::uint32_t row) const {
  const std::uint8_t* b = binned_.data() + row * bins_.features();
  int n = 0;
  while (!tree.nodes[n].is_leaf()) {
    const GBDTNode& node = tree.nodes[n];
    const auto f = static_cast<std::size_t>(node.feature);
    const bool left = b[f] == bins_.missing_bin(f) ? node.missing_left : b[f] <= split_bin_[n];
    n = left ? node.left : node.right;
  }
  return n;
}

GBDTTree TreeGrower::grow(std::span<const double> gradients, std::span<const double> hessians,
                          comm::Communicator& comm, double* outputs, std::size_t stride,
                          const TreeSample& sample) {
  DML_CHECK_EQ(gradients.size(), rows_count_, "gradients");
  DML_CHECK_EQ(hessians.size(), rows_count_, "hessians");
  if (sample.all_rows) {
    rows_.resize(rows_count_);
    std::iota(rows_.begin(), rows_.end(), 0u);
  } else {
    rows_ = sample.rows;
  }
  allowed_.assign(active_.size(), true);
  if (!sample.features.empty())
    for (std::size_t a = 0; a < active_.size(); ++a)
      allowed_[a] = sample.features[static_cast<std::size_t>(active_[a])];
  sampled_.clear();
  for (std::size_t a = 0; a < active_.size(); ++a)
    if (allowed_[a]) sampled_.push_back({static_cast<std::uint32_t>(active_[a]), 3 * offset_[a]});
  split_bin_.assign(1, -1);

  std::vector<Leaf> leaves;
  leaves.push_back({0, 0, rows_.size(), 0, 0, 0, 0, take_histogram(), {}});
  Leaf& root = leaves[0];
  build_histogram(root, gradients, hessians, root.hist.data());
  comm.allreduce(comm::view(root.hist));
  root.g = root.hist[hist_size_ - 3];
  root.h = root.hist[hist_size_ - 2];
  root.count = root.hist[hist_size_ - 1];
  GBDTTree tree;
  tree.nodes.push_back({.samples = static_cast<std::int64_t>(root.count)});
  find_best_split(root);

  const auto budget_left = [&] {
    if (options_.max_leaf_nodes == 0) return leaves.size();  // as many as there are leaves
    return static_cast<std::size_t>(options_.max_leaf_nodes) -
           std::min(leaves.size(), static_cast<std::size_t>(options_.max_leaf_nodes));
  };
  for (;;) {
    std::vector<std::size_t> chosen;
    for (std::size_t i = 0; i < leaves.size(); ++i)
      if (leaves[i].best.feature >= 0) chosen.push_back(i);
    if (options_.depthwise && !chosen.empty()) {
      int depth = leaves[chosen[0]].depth;
      for (auto i : chosen) depth = std::min(depth, leaves[i].depth);
      std::erase_if(chosen, [&](std::size_t i) { return leaves[i].depth != depth; });
    }
    // Largest gain first; the earlier leaf on ties (the same order on every rank).
    std::stable_sort(chosen.begin(), chosen.end(), [&](std::size_t a, std::size_t b) {
      return leaves[a].best.gain > leaves[b].best.gain;
    });
    chosen.resize(std::min(chosen.size(), options_.depthwise ? budget_left() : std::size_t{1}));
    if (chosen.empty() || budget_left() == 0) break;
    split_leaves(leaves, chosen, tree, gradients, hessians, comm);
  }

  for (Leaf& leaf : leaves) {
    recycle(leaf.hist);
    const double v = leaf_value(leaf);
    tree.nodes[leaf.node].value = v;
    for (std::size_t p = leaf.begin; p < leaf.end; ++p) outputs[rows_[p] * stride] += v;
  }
  if (rows_.size() < rows_count_) {  // the rows left out of the sample
    std::vector<bool> grown(rows_count_, false);
    for (std::uint32_t r : rows_) grown[r] = true;
    for (std::uint32_t r = 0; r < rows_count_; ++r)
      if (!grown[r]) outputs[r * stride] += tree.nodes[leaf_of(tree, r)].value;
  }
  return tree;
}

}  // namespace distml::ml
