#include "distml/ml/gbdt_tree.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "distml/core/error.h"

namespace distml::ml {
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
  DML_CHECK(hist_size_ < std::numeric_limits<std::uint32_t>::max(), "histogram of ", hist_size_,
            " entries");
  const std::size_t features = bins.features();
  std::vector<std::size_t> rows_in(256);
  for (const int f : active_) {
    std::fill(rows_in.begin(), rows_in.end(), 0);
    for (std::size_t r = 0; r < rows; ++r) ++rows_in[binned[r * features + f]];
    common_bin_.push_back(static_cast<std::uint8_t>(
        std::max_element(rows_in.begin(), rows_in.end()) - rows_in.begin()));
  }
  sparse_begin_.reserve(rows + 1);
  for (std::size_t r = 0; r < rows; ++r) {
    sparse_begin_.push_back(sparse_entries_.size());
    for (std::size_t a = 0; a < active_.size(); ++a) {
      const std::uint8_t b = binned[r * features + static_cast<std::size_t>(active_[a])];
      if (b != common_bin_[a])
        sparse_entries_.push_back(static_cast<std::uint32_t>(3 * (offset_[a] + b)));
    }
  }
  sparse_begin_.push_back(sparse_entries_.size());
}

double* TreeGrower::append_to_batch() {
  batch_.resize(batch_.size() + hist_size_, 0.0);
  return batch_.data() + batch_.size() - hist_size_;
}

void TreeGrower::build_histogram(const Growth& growth, const Leaf& leaf, double* hist) const {
  const std::size_t features = bins_.features();
  const auto g = growth.task->gradients, h = growth.task->hessians;
  double* totals = hist + hist_size_ - 3;
  const auto add = [](double* e, double gr, double hr) {
    e[0] += gr;
    e[1] += hr;
    e[2] += 1;
  };
  // The common bins' sums cost a pass over the sampled features' entries, worth it when the
  // entries the rows skip outnumber those.
  const double skipped_per_row = static_cast<double>(growth.sampled.size()) -
                                 static_cast<double>(sparse_entries_.size()) /
                                     static_cast<double>(std::max<std::size_t>(1, rows_count_));
  double sampled_entries = 0;
  for (const auto& s : growth.sampled) sampled_entries += s.bins;
  const bool sparse =
      skipped_per_row * static_cast<double>(leaf.end - leaf.begin) > sampled_entries;
  for (std::size_t p = leaf.begin; p < leaf.end; ++p) {
    const std::uint32_t r = growth.rows[p];
    const double gr = g[r], hr = h[r];
    if (sparse) {
      // Every active feature's entry, sampled or not: the others are never read.
      for (std::size_t i = sparse_begin_[r]; i < sparse_begin_[r + 1]; ++i)
        add(hist + sparse_entries_[i], gr, hr);
    } else {
      const std::uint8_t* b = binned_.data() + r * features;
      for (const auto& s : growth.sampled) add(hist + s.first + 3 * b[s.feature], gr, hr);
    }
    add(totals, gr, hr);
  }
  if (!sparse) return;
  for (const auto& s : growth.sampled) {
    double* e = hist + s.first;
    double* common = e + 3 * s.common;
    common[0] = totals[0];
    common[1] = totals[1];
    common[2] = totals[2];
    for (int b = 0; b < s.bins; ++b)
      if (b != s.common)
        for (int j = 0; j < 3; ++j) common[j] -= e[3 * b + j];
  }
}

bool TreeGrower::may_split(const Leaf& leaf) const {
  return leaf.count >= 2.0 * options_.min_samples_leaf && leaf.h >= 2 * options_.min_child_weight &&
         (options_.max_depth == 0 || leaf.depth < options_.max_depth) && !active_.empty();
}

void TreeGrower::find_best_split(const Growth& growth, Leaf& leaf) const {
  leaf.best = {};
  if (!may_split(leaf)) return;
  const double l2 = options_.l2_regularization;
  const double min_rows = options_.min_samples_leaf;
  const double parent = leaf.g * leaf.g / (leaf.h + l2);
  for (std::size_t a = 0; a < active_.size(); ++a) {
    if (!growth.allowed[a]) continue;
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

void TreeGrower::split_chosen(Growth& growth) {
  const std::size_t features = bins_.features();
  GBDTTree& tree = growth.tree;
  growth.children.clear();
  for (std::size_t i : growth.chosen) {
    const Leaf& parent = growth.leaves[i];
    const Split s = parent.best;
    const int f = active_[s.feature];
    const auto& edges = bins_.edges(static_cast<std::size_t>(f));
    const std::uint8_t missing = bins_.missing_bin(static_cast<std::size_t>(f));
    // A stable partition through right_rows_, which std::stable_partition would allocate anew
    // at every split.
    right_rows_.clear();
    std::size_t mid_index = parent.begin;
    for (std::size_t p = parent.begin; p < parent.end; ++p) {
      const std::uint32_t r = growth.rows[p];
      const std::uint8_t b = binned_[r * features + f];
      if (b == missing ? s.missing_left : b <= s.bin)
        growth.rows[mid_index++] = r;
      else
        right_rows_.push_back(r);
    }
    std::copy(right_rows_.begin(), right_rows_.end(), growth.rows.begin() + mid_index);
    const int left_node = static_cast<int>(tree.nodes.size());
    GBDTNode& node = tree.nodes[parent.node];
    node.feature = f;
    // Past the last edge every present value goes left (JSON has no infinity).
    node.threshold = static_cast<std::size_t>(s.bin) < edges.size()
                         ? edges[s.bin]
                         : std::numeric_limits<double>::max();
    node.missing_left = s.missing_left;
    node.gain = s.gain;
    growth.split_bin[static_cast<std::size_t>(parent.node)] = s.bin;
    node.left = left_node;
    node.right = left_node + 1;
    Children c{{left_node, parent.begin, mid_index, parent.depth + 1, s.g, s.h, s.count, {}, {}},
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
    tree.nodes.push_back({.samples = static_cast<std::int64_t>(c.left.count)});
    tree.nodes.push_back({.samples = static_cast<std::int64_t>(c.right.count)});
    growth.split_bin.resize(tree.nodes.size(), -1);
    c.needs_histograms = may_split(c.left) || may_split(c.right);
    if (c.needs_histograms)
      build_histogram(growth, c.left.count <= c.right.count ? c.left : c.right, append_to_batch());
    growth.children.push_back(std::move(c));
  }
}

void TreeGrower::finish_children(Growth& growth, const double*& next) {
  for (std::size_t k = 0; k < growth.chosen.size(); ++k) {
    Children& c = growth.children[k];
    Leaf& parent = growth.leaves[growth.chosen[k]];
    if (c.needs_histograms) {
      const bool left_smaller = c.left.count <= c.right.count;
      Leaf& smaller = left_smaller ? c.left : c.right;
      Leaf& larger = left_smaller ? c.right : c.left;
      const double* s = next;
      next += hist_size_;
      smaller.hist = take_histogram();
      std::copy_n(s, hist_size_, smaller.hist.data());
      larger.hist = std::move(parent.hist);
      for (std::size_t j = 0; j < hist_size_; ++j) larger.hist[j] -= s[j];
      find_best_split(growth, c.left);
      find_best_split(growth, c.right);
      for (Leaf* child : {&c.left, &c.right})
        if (child->best.feature < 0) recycle(child->hist);
    }
    recycle(parent.hist);
    parent = std::move(c.left);
  }
  for (auto& c : growth.children) growth.leaves.push_back(std::move(c.right));
  growth.children.clear();
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

int TreeGrower::leaf_of(const Growth& growth, std::uint32_t row) const {
  const std::uint8_t* b = binned_.data() + row * bins_.features();
  const auto& nodes = growth.tree.nodes;
  int n = 0;
  while (!nodes[n].is_leaf()) {
    const GBDTNode& node = nodes[n];
    const auto f = static_cast<std::size_t>(node.feature);
    const bool left =
        b[f] == bins_.missing_bin(f) ? node.missing_left : b[f] <= growth.split_bin[n];
    n = left ? node.left : node.right;
  }
  return n;
}

void TreeGrower::start(Growth& growth) {
  const TreeTask& task = *growth.task;
  DML_CHECK_EQ(task.gradients.size(), rows_count_, "gradients");
  DML_CHECK_EQ(task.hessians.size(), rows_count_, "hessians");
  const TreeSample& sample = task.sample;
  if (sample.all_rows) {
    growth.rows.resize(rows_count_);
    std::iota(growth.rows.begin(), growth.rows.end(), 0u);
  } else {
    growth.rows = sample.rows;
  }
  growth.allowed.assign(active_.size(), true);
  if (!sample.features.empty())
    for (std::size_t a = 0; a < active_.size(); ++a)
      growth.allowed[a] = sample.features[static_cast<std::size_t>(active_[a])];
  growth.sampled.clear();
  for (std::size_t a = 0; a < active_.size(); ++a)
    if (growth.allowed[a]) {
      const auto f = static_cast<std::size_t>(active_[a]);
      growth.sampled.push_back(
          {static_cast<std::uint32_t>(f), 3 * offset_[a], bins_.bins(f) + 1, common_bin_[a]});
    }
  growth.split_bin.assign(1, -1);
  growth.tree = {};
  growth.leaves.clear();
  growth.leaves.push_back({0, 0, growth.rows.size(), 0, 0, 0, 0, {}, {}});
  build_histogram(growth, growth.leaves[0], append_to_batch());
}

void TreeGrower::finish_root(Growth& growth, const double* hist) {
  Leaf& root = growth.leaves[0];
  root.hist = take_histogram();
  std::copy_n(hist, hist_size_, root.hist.data());
  root.g = root.hist[hist_size_ - 3];
  root.h = root.hist[hist_size_ - 2];
  root.count = root.hist[hist_size_ - 1];
  growth.tree.nodes.push_back({.samples = static_cast<std::int64_t>(root.count)});
  find_best_split(growth, root);
}

void TreeGrower::choose(Growth& growth) const {
  const auto& leaves = growth.leaves;
  const auto max_leaves = static_cast<std::size_t>(options_.max_leaf_nodes);
  const std::size_t budget_left = max_leaves == 0
                                      ? leaves.size()  // as many as there are leaves
                                      : max_leaves - std::min(leaves.size(), max_leaves);
  auto& chosen = growth.chosen;
  chosen.clear();
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
  chosen.resize(
      std::min({chosen.size(), options_.depthwise ? budget_left : std::size_t{1}, budget_left}));
}

void TreeGrower::finish_tree(Growth& growth) {
  const TreeTask& task = *growth.task;
  GBDTTree& tree = growth.tree;
  for (Leaf& leaf : growth.leaves) {
    recycle(leaf.hist);
    const double v = leaf_value(leaf);
    tree.nodes[leaf.node].value = v;
    for (std::size_t p = leaf.begin; p < leaf.end; ++p)
      task.outputs[growth.rows[p] * task.stride] += v;
  }
  if (growth.rows.size() < rows_count_) {  // the rows left out of the sample
    std::vector<bool> grown(rows_count_, false);
    for (std::uint32_t r : growth.rows) grown[r] = true;
    for (std::uint32_t r = 0; r < rows_count_; ++r)
      if (!grown[r]) task.outputs[r * task.stride] += tree.nodes[leaf_of(growth, r)].value;
  }
}

void TreeGrower::grow_together(std::span<Growth> growths, comm::Communicator& comm) {
  batch_.clear();
  for (Growth& growth : growths) start(growth);
  comm.allreduce(comm::view(batch_));
  for (std::size_t t = 0; t < growths.size(); ++t)
    finish_root(growths[t], batch_.data() + t * hist_size_);
  // Every rank decides alike from global sums, so every rank makes the same all-reduces.
  for (;;) {
    batch_.clear();
    bool splitting = false;
    for (Growth& growth : growths) {
      choose(growth);
      if (growth.chosen.empty()) continue;
      splitting = true;
      split_chosen(growth);
    }
    if (!splitting) break;
    if (!batch_.empty()) comm.allreduce(comm::view(batch_));
    const double* next = batch_.data();
    for (Growth& growth : growths) finish_children(growth, next);
  }
  for (Growth& growth : growths) finish_tree(growth);
}

std::vector<GBDTTree> TreeGrower::grow(std::span<const TreeTask> tasks, comm::Communicator& comm) {
  // A tree holds at most a histogram per leaf and one per split's smaller child.
  const double leaves = options_.max_leaf_nodes > 0
                            ? options_.max_leaf_nodes
                            : std::ldexp(1.0, std::min(options_.max_depth, 30));
  const double tree_bytes = 2 * leaves * static_cast<double>(histogram_bytes());
  // Alone, a rank has no all-reduces to save, and trees grown one by one keep their rows and
  // histograms in cache (side by side, 26 classes on a 16-feature table fit 15% slower).
  const auto together =
      comm.size() == 1
          ? std::size_t{1}
          : static_cast<std::size_t>(std::clamp(options_.together_bytes / tree_bytes, 1.0,
                                                static_cast<double>(tasks.size())));
  std::vector<GBDTTree> trees;
  for (std::size_t first = 0; first < tasks.size(); first += together) {
    const std::size_t n = std::min(together, tasks.size() - first);
    growths_.resize(std::max(growths_.size(), n));
    for (std::size_t t = 0; t < n; ++t) growths_[t].task = &tasks[first + t];
    grow_together(std::span(growths_).first(n), comm);
    for (std::size_t t = 0; t < n; ++t) trees.push_back(std::move(growths_[t].tree));
  }
  return trees;
}

GBDTTree TreeGrower::grow(std::span<const double> gradients, std::span<const double> hessians,
                          comm::Communicator& comm, double* outputs, std::size_t stride,
                          const TreeSample& sample) {
  const TreeTask task{gradients, hessians, outputs, stride, sample};
  return std::move(grow({&task, 1}, comm)[0]);
}

}  // namespace distml::ml
