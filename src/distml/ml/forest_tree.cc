#include "distml/ml/forest_tree.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>

#include "distml/core/error.h"
#include "distml/ml/agreement.h"
#include "distml/ml/kmeans_local.h"

namespace distml::ml {
namespace {

constexpr std::uint64_t kFeatureStream = 0x66656174;  // derive_seed stream of feature draws
constexpr int kRowsTag = 4711;                        // point-to-point tag of the exchange of rows

// A node still to be split: this rank's rows of it and its global channel sums.
struct OpenNode {
  int node;
  std::uint64_t key;  // seeds its feature draws; the children's derive from it
  int depth;
  int pass = 0;  // how many draws of candidates found no split
  std::vector<std::uint32_t> rows;
  std::vector<double> sums;
};

struct Split {
  double gain = -std::numeric_limits<double>::infinity();
  int feature = -1;
  int bin = 0;
  bool missing_left = false;
  std::vector<double> left;  // the left child's channel sums
};

// The split rule, shared by the distributed and the one-rank growth.
class Grower {
 public:
  Grower(const FeatureBins& bins, const ForestGrowth& growth)
      : bins_(bins),
        growth_(growth),
        channels_(growth.classes > 0 ? growth.classes + 1 : 3),
        gain_channels_(growth.classes > 0 ? growth.classes : 1) {
    for (std::size_t f = 0; f < bins.features(); ++f)
      if (bins.bins(f) > 1 || bins.has_missing(f)) active_.push_back(static_cast<int>(f));
    draws_ =
        growth.max_features == 0 ? active_.size() : std::min(growth.max_features, active_.size());
    seen_.assign(active_.size(), 0);
  }

  std::size_t channels() const { return channels_; }
  double weight(const std::vector<double>& sums) const { return sums[channels_ - 1]; }

  // Adds row r to the channel sums at e.
  void add_row(const ForestRows& rows, std::uint32_t r, double* e) const {
    const double w = rows.weight[r];
    if (growth_.classes > 0) {
      e[static_cast<std::size_t>(rows.y[r])] += w;
    } else {
      e[0] += w * rows.y[r];
      e[1] += w * rows.y_squared[r];
    }
    e[channels_ - 1] += w;
  }

  bool may_split(const OpenNode& o) const {
    const double w = weight(o.sums);
    if (w < 2 * growth_.min_samples_leaf || active_.empty()) return false;
    if (growth_.max_depth > 0 && o.depth >= growth_.max_depth) return false;
    // Impurity against the second moment (sum w * |one-hot|^2 or sum w * y^2): what is left
    // below 1e-10 of it is rounding in the subtraction, not a difference between rows.
    const double second = growth_.classes > 0 ? w : o.sums[1];
    const double impurity = second - score(o.sums.data());
    return impurity > 1e-10 * second;
  }

  // The features o may split on in its current pass; empty when every feature was tried.
  std::vector<int> candidates(const OpenNode& o) {
    const std::size_t begin = static_cast<std::size_t>(o.pass) * draws_;
    if (begin >= active_.size()) return {};
    if (draws_ == active_.size()) return active_;
    const std::size_t end = std::min(begin + draws_, active_.size());
    std::vector<int> out;
    // Distinct draws by rejection, so that pass p continues the sequence of pass p - 1.
    data::SplitMix64 rng(data::derive_seed(o.key, kFeatureStream));
    std::vector<int> drawn;
    while (drawn.size() < end) {
      const auto a = static_cast<std::size_t>(rng.next() % active_.size());
      if (seen_[a]) continue;
      seen_[a] = 1;
      drawn.push_back(static_cast<int>(a));
    }
    for (int a : drawn) seen_[static_cast<std::size_t>(a)] = 0;
    for (std::size_t i = begin; i < end; ++i)
      out.push_back(active_[static_cast<std::size_t>(drawn[i])]);
    return out;
  }

  // Histogram of o's rows over `features`: (bins + missing bin) x channels per feature.
  std::size_t histogram_size(const std::vector<int>& features) const {
    std::size_t n = 0;
    for (int f : features) n += (static_cast<std::size_t>(bins_.bins(f)) + 1) * channels_;
    return n;
  }
  void build_histogram(const ForestRows& rows, const OpenNode& o, const std::vector<int>& features,
                       double* hist) const {
    const std::size_t F = bins_.features();
    std::vector<std::size_t> offset;
    std::size_t n = 0;
    for (int f : features) {
      offset.push_back(n);
      n += (static_cast<std::size_t>(bins_.bins(f)) + 1) * channels_;
    }
    std::fill(hist, hist + n, 0.0);
    for (std::uint32_t r : o.rows) {
      const std::uint8_t* b = rows.binned.data() + static_cast<std::size_t>(r) * F;
      for (std::size_t j = 0; j < features.size(); ++j)
        add_row(rows, r, hist + offset[j] + b[features[j]] * channels_);
    }
  }

  Split split_from_histogram(const OpenNode& o, const std::vector<int>& features,
                             const double* hist) const {
    Split best;
    for (int f : features) {
      const auto bins = static_cast<std::size_t>(bins_.bins(f));
      scan(o, f, bin_ids(bins), hist, hist + bins * channels_, best);
      hist += (bins + 1) * channels_;
    }
    return best;
  }

  // The same split found by sorting o's rows per feature: cheaper than a histogram when the
  // node has fewer rows than bins.
  Split split_from_rows(const ForestRows& rows, const OpenNode& o,
                        const std::vector<int>& features) const {
    const std::size_t F = bins_.features();
    Split best;
    std::vector<std::pair<std::uint8_t, std::uint32_t>> order(o.rows.size());
    std::vector<int> groups;
    std::vector<double> sums, missing(channels_);
    for (int f : features) {
      const std::uint8_t missing_bin = bins_.missing_bin(f);
      for (std::size_t i = 0; i < o.rows.size(); ++i)
        order[i] = {rows.binned[static_cast<std::size_t>(o.rows[i]) * F + f], o.rows[i]};
      std::sort(order.begin(), order.end());
      groups.clear();
      sums.clear();
      std::fill(missing.begin(), missing.end(), 0.0);
      for (const auto& [b, r] : order) {
        if (b == missing_bin) {
          add_row(rows, r, missing.data());
          continue;
        }
        if (groups.empty() || groups.back() != b) {
          groups.push_back(b);
          sums.resize(sums.size() + channels_, 0.0);
        }
        add_row(rows, r, sums.data() + sums.size() - channels_);
      }
      scan(o, f, groups, sums.data(), missing.data(), best);
    }
    return best;
  }

  // Makes o's node a split by s, partitions its rows and returns the two children.
  std::pair<OpenNode, OpenNode> split(ForestTree& tree, OpenNode& o, const Split& s,
                                      const ForestRows& rows) const {
    const std::size_t F = bins_.features();
    const auto f = static_cast<std::size_t>(s.feature);
    const std::uint8_t missing_bin = bins_.missing_bin(f);
    OpenNode left{
        static_cast<int>(tree.nodes.size()), data::derive_seed(o.key, 1), o.depth + 1, 0, {}, s.left};
    OpenNode right{left.node + 1, data::derive_seed(o.key, 2), o.depth + 1, 0, {}, o.sums};
    for (std::size_t c = 0; c < channels_; ++c) right.sums[c] -= s.left[c];
    for (std::uint32_t r : o.rows) {
      const std::uint8_t b = rows.binned[static_cast<std::size_t>(r) * F + f];
      const bool goes_left = b == missing_bin ? s.missing_left : b <= s.bin;
      (goes_left ? left : right).rows.push_back(r);
    }
    ForestNode& node = tree.nodes[static_cast<std::size_t>(o.node)];
    const auto& edges = bins_.edges(f);
    node.feature = s.feature;
    // Past the last edge every present value goes left (JSON has no infinity).
    node.threshold = static_cast<std::size_t>(s.bin) < edges.size()
                         ? edges[static_cast<std::size_t>(s.bin)]
                         : std::numeric_limits<double>::max();
    node.missing_left = s.missing_left;
    node.gain = s.gain;
    node.left = left.node;
    node.right = right.node;
    tree.nodes.push_back({.weight = weight(left.sums), .value = {}});
    tree.nodes.push_back({.weight = weight(right.sums), .value = {}});
    return {std::move(left), std::move(right)};
  }

  void make_leaf(ForestTree& tree, const OpenNode& o) const {
    ForestNode& node = tree.nodes[static_cast<std::size_t>(o.node)];
    const double w = weight(o.sums);
    node.value.assign(gain_channels_, 0.0);
    for (std::size_t k = 0; k < gain_channels_; ++k) node.value[k] = w > 0 ? o.sums[k] / w : 0;
  }

 private:
  // sum_k S_k^2 / S_w over the channels that enter the impurity.
  double score(const double* s) const {
    const double w = s[channels_ - 1];
    if (w <= 0) return 0;
    double sum = 0;
    for (std::size_t k = 0; k < gain_channels_; ++k) sum += s[k] * s[k];
    return sum / w;
  }

  static std::span<const int> bin_ids(std::size_t n) {
    static const std::vector<int> ids = [] {
      std::vector<int> v(256);
      std::iota(v.begin(), v.end(), 0);
      return v;
    }();
    return {ids.data(), n};
  }

  // Tries feature f's thresholds: `sums` holds the channels of each listed bin, in increasing
  // bin order; `missing` those of the rows missing f. Keeps the best in `best`; strictly
  // better only, so that ties keep the earlier candidate, missing right, the lower bin.
  void scan(const OpenNode& o, int f, std::span<const int> bins, const double* sums,
            const double* missing, Split& best) const {
    const std::size_t C = channels_;
    const double total_w = o.sums[C - 1], min_w = growth_.min_samples_leaf;
    const double parent = score(o.sums.data());
    const bool has_missing = missing[C - 1] > 0;
    std::vector<double> left(C), right(C);
    for (const bool missing_left : {false, true}) {
      if (missing_left && !has_missing) break;
      for (std::size_t c = 0; c < C; ++c) left[c] = missing_left ? missing[c] : 0;
      for (std::size_t i = 0; i < bins.size(); ++i) {
        const double* e = sums + i * C;
        if (e[C - 1] == 0) continue;  // an empty bin moves no row
        for (std::size_t c = 0; c < C; ++c) left[c] += e[c];
        if (left[C - 1] < min_w) continue;
        if (total_w - left[C - 1] < min_w) break;
        for (std::size_t c = 0; c < C; ++c) right[c] = o.sums[c] - left[c];
        const double gain = score(left.data()) + score(right.data()) - parent;
        if (gain > best.gain) best = {gain, f, bins[i], missing_left, left};
      }
    }
    // A node whose rows miss nothing sends a missing value to its heavier child.
    if (best.feature == f && !has_missing) best.missing_left = 2 * best.left[C - 1] >= total_w;
  }

  const FeatureBins& bins_;
  ForestGrowth growth_;
  std::size_t channels_, gain_channels_;
  std::vector<int> active_;  // features with two bins or a missing value
  std::size_t draws_;        // candidates per pass
  std::vector<char> seen_;   // scratch of candidates()
};

// Grows the subtree of `root` (already a node of `tree`) on rows that are all on this rank.
void grow_alone(Grower& g, const ForestRows& rows, OpenNode root, ForestTree& tree) {
  std::vector<OpenNode> stack;
  stack.push_back(std::move(root));
  std::vector<double> hist;
  while (!stack.empty()) {
    OpenNode o = std::move(stack.back());
    stack.pop_back();
    if (!g.may_split(o)) {
      g.make_leaf(tree, o);
      continue;
    }
    const auto features = g.candidates(o);
    if (features.empty()) {
      g.make_leaf(tree, o);
      continue;
    }
    const std::size_t size = g.histogram_size(features);
    Split s;
    // Sorting a feature's rows costs about rows x log2(rows); its histogram costs its bins x
    // channels to clear and to scan. Either finds the same split.
    const auto rows_count = static_cast<double>(o.rows.size());
    if (rows_count * std::log2(rows_count + 1) * static_cast<double>(features.size()) <
        static_cast<double>(size)) {
      s = g.split_from_rows(rows, o, features);
    } else {
      hist.resize(size);
      g.build_histogram(rows, o, features, hist.data());
      s = g.split_from_histogram(o, features, hist.data());
    }
    if (s.feature < 0) {
      ++o.pass;
      stack.push_back(std::move(o));
      continue;
    }
    auto [left, right] = g.split(tree, o, s, rows);
    stack.push_back(std::move(right));
    stack.push_back(std::move(left));
  }
}

// Renumbers the nodes depth-first from the root, so that the file does not depend on the order
// in which the nodes were grown.
ForestTree in_depth_first_order(ForestTree tree) {
  ForestTree out;
  std::vector<std::pair<int, int>> stack{{0, -1}};  // (old node, new parent)
  while (!stack.empty()) {
    auto [old, parent] = stack.back();
    stack.pop_back();
    const int index = static_cast<int>(out.nodes.size());
    out.nodes.push_back(std::move(tree.nodes[static_cast<std::size_t>(old)]));
    if (parent >= 0) {
      ForestNode& p = out.nodes[static_cast<std::size_t>(parent)];
      (p.left == -1 ? p.left : p.right) = index;
    }
    ForestNode& n = out.nodes.back();
    if (n.is_leaf()) continue;
    const int left = n.left, right = n.right;
    n.left = n.right = -1;
    stack.push_back({right, index});
    stack.push_back({left, index});
  }
  return out;
}

// The nodes of a subtree as numbers: per node feature, threshold, missing_left, left, right,
// gain, weight, then the value (zeros for a split).
void append_subtree(const ForestTree& t, std::size_t value_size, std::vector<double>& out) {
  out.push_back(static_cast<double>(t.nodes.size()));
  for (const ForestNode& n : t.nodes) {
    out.insert(out.end(),
               {static_cast<double>(n.feature), n.threshold, n.missing_left ? 1.0 : 0.0,
                static_cast<double>(n.left), static_cast<double>(n.right), n.gain, n.weight});
    for (std::size_t k = 0; k < value_size; ++k) out.push_back(n.is_leaf() ? n.value[k] : 0.0);
  }
}

// Reads one subtree written by append_subtree at `p` into tree: its root replaces node `at`,
// the rest go at the end.
const double* splice_subtree(const double* p, std::size_t value_size, int at, ForestTree& tree) {
  const auto count = static_cast<std::size_t>(*p++);
  const int base = static_cast<int>(tree.nodes.size()) - 1;  // subtree node i > 0 -> base + i
  const auto place = [&](double i) { return i == 0 ? at : base + static_cast<int>(i); };
  for (std::size_t i = 0; i < count; ++i) {
    ForestNode n;
    n.feature = static_cast<int>(p[0]);
    n.threshold = p[1];
    n.missing_left = p[2] != 0;
    n.left = n.feature < 0 ? -1 : place(p[3]);
    n.right = n.feature < 0 ? -1 : place(p[4]);
    n.gain = p[5];
    n.weight = p[6];
    if (n.is_leaf()) n.value.assign(p + 7, p + 7 + value_size);
    p += 7 + value_size;
    if (i == 0)
      tree.nodes[static_cast<std::size_t>(at)] = std::move(n);
    else
      tree.nodes.push_back(std::move(n));
  }
  return p;
}

// What the exchange of step 3 reuses from tree to tree.
struct ExchangeBuffers {
  std::vector<std::vector<std::uint8_t>> outgoing, incoming;  // by rank
  std::vector<std::uint8_t> binned;                           // the owned nodes' rows
  std::vector<double> y, y_squared, weight;
  std::vector<double> subtrees, all;
};

// The exchange of step 3 in forest_tree.h: sends each deferred node's rows to its owner, grows
// the owned subtrees and all-gathers them into `tree`.
void grow_deferred(Grower& g, const FeatureBins& bins, const ForestRows& rows,
                   std::vector<OpenNode>& deferred, std::size_t value_size, ForestTree& tree,
                   ExchangeBuffers& b, comm::Communicator& comm) {
  const int P = comm.size(), me = comm.rank();
  const std::size_t D = deferred.size(), F = bins.features();
  // Owners: heaviest node first to the least loaded rank (the same on every rank).
  std::vector<std::size_t> by_weight(D);
  std::iota(by_weight.begin(), by_weight.end(), std::size_t{0});
  std::stable_sort(by_weight.begin(), by_weight.end(), [&](std::size_t a, std::size_t b) {
    return g.weight(deferred[a].sums) > g.weight(deferred[b].sums);
  });
  std::vector<int> owner(D);
  std::vector<double> load(static_cast<std::size_t>(P), 0.0);
  for (std::size_t d : by_weight) {
    const auto least = std::min_element(load.begin(), load.end()) - load.begin();
    owner[d] = static_cast<int>(least);
    load[static_cast<std::size_t>(least)] += g.weight(deferred[d].sums);
  }

  // Every rank's row count of every deferred node, then the rows themselves.
  std::vector<std::int64_t> mine(D), counts(D * static_cast<std::size_t>(P));
  for (std::size_t d = 0; d < D; ++d) mine[d] = static_cast<std::int64_t>(deferred[d].rows.size());
  comm.allgather(comm::cview(mine), comm::view(counts));
  const std::size_t record = F + 3 * sizeof(double);
  const auto pack = [&](std::uint32_t r, std::uint8_t* out) {
    std::copy_n(rows.binned.data() + static_cast<std::size_t>(r) * F, F, out);
    const double extra[3] = {rows.y[r], rows.y_squared.empty() ? 0.0 : rows.y_squared[r],
                             rows.weight[r]};
    std::memcpy(out + F, extra, sizeof extra);
  };
  const auto P_ = static_cast<std::size_t>(P);
  b.outgoing.resize(P_);
  b.incoming.resize(P_);
  std::vector<std::size_t> filled(P_, 0);
  for (std::size_t o = 0; o < P_; ++o) {
    std::size_t n = 0;
    for (std::size_t d = 0; d < D; ++d)
      if (owner[d] == static_cast<int>(o)) n += deferred[d].rows.size();
    b.outgoing[o].resize(n * record);
  }
  for (std::size_t d = 0; d < D; ++d) {
    const auto o = static_cast<std::size_t>(owner[d]);
    for (std::uint32_t r : deferred[d].rows) {
      pack(r, b.outgoing[o].data() + filled[o]);
      filled[o] += record;
    }
  }
  std::vector<comm::Work> pending;
  for (int s = 0; s < P; ++s) {
    if (s == me) continue;  // its own rows are read from outgoing
    std::size_t n = 0;
    for (std::size_t d = 0; d < D; ++d)
      if (owner[d] == me)
        n += static_cast<std::size_t>(counts[static_cast<std::size_t>(s) * D + d]);
    b.incoming[static_cast<std::size_t>(s)].resize(n * record);
    if (n > 0)
      pending.push_back(
          comm.irecv(comm::view(b.incoming[static_cast<std::size_t>(s)]), s, kRowsTag));
  }
  for (int o = 0; o < P; ++o)
    if (o != me && !b.outgoing[static_cast<std::size_t>(o)].empty())
      pending.push_back(
          comm.isend(comm::cview(b.outgoing[static_cast<std::size_t>(o)]), o, kRowsTag));
  for (auto& w : pending) w.wait();

  // The owned nodes' rows, unpacked into one local table; each node lists its rows in it.
  std::size_t owned_rows = 0;
  for (std::size_t d = 0; d < D; ++d)
    if (owner[d] == me)
      for (std::size_t s = 0; s < P_; ++s)
        owned_rows += static_cast<std::size_t>(counts[s * D + d]);
  b.binned.resize(owned_rows * F);
  b.y.resize(owned_rows);
  b.y_squared.resize(owned_rows);
  b.weight.resize(owned_rows);
  std::vector<OpenNode> roots;
  std::vector<std::size_t> cursor(P_, 0);
  std::uint32_t next_row = 0;
  for (std::size_t d = 0; d < D; ++d) {
    if (owner[d] != me) continue;
    OpenNode root = std::move(deferred[d]);
    root.rows.clear();
    for (std::size_t s = 0; s < P_; ++s) {
      const auto n = static_cast<std::size_t>(counts[s * D + d]);
      const auto& from = s == static_cast<std::size_t>(me) ? b.outgoing[s] : b.incoming[s];
      const std::uint8_t* p = from.data() + cursor[s] * record;
      for (std::size_t i = 0; i < n; ++i, p += record, ++next_row) {
        root.rows.push_back(next_row);
        std::copy_n(p, F, b.binned.data() + static_cast<std::size_t>(next_row) * F);
        double extra[3];
        std::memcpy(extra, p + F, sizeof extra);
        b.y[next_row] = extra[0];
        b.y_squared[next_row] = extra[1];
        b.weight[next_row] = extra[2];
      }
      cursor[s] += n;
    }
    roots.push_back(std::move(root));
  }
  const ForestRows gathered{b.binned, b.y, b.y_squared, b.weight};
  b.subtrees.clear();
  for (OpenNode& root : roots) {
    ForestTree sub;
    sub.nodes.push_back({.weight = g.weight(root.sums), .value = {}});
    root.node = 0;
    grow_alone(g, gathered, std::move(root), sub);
    append_subtree(sub, value_size, b.subtrees);
  }

  const auto sizes = allgather_i64(comm, static_cast<std::int64_t>(b.subtrees.size()));
  std::vector<std::size_t> block(sizes.begin(), sizes.end());
  b.all.resize(std::accumulate(block.begin(), block.end(), std::size_t{0}));
  comm.allgatherv(comm::cview(b.subtrees), comm::view(b.all), block);
  std::vector<const double*> next(P_);
  const double* p = b.all.data();
  for (int s = 0; s < P; ++s) {
    next[static_cast<std::size_t>(s)] = p;
    p += block[static_cast<std::size_t>(s)];
  }
  for (std::size_t d = 0; d < D; ++d) {
    auto& q = next[static_cast<std::size_t>(owner[d])];
    q = splice_subtree(q, value_size, deferred[d].node, tree);
  }
}

}  // namespace

const std::vector<double>& ForestTree::predict(const double* x) const {
  std::size_t n = 0;
  while (!nodes[n].is_leaf()) {
    const ForestNode& node = nodes[n];
    const double v = x[node.feature];
    const bool left = std::isnan(v) ? node.missing_left : v <= node.threshold;
    n = static_cast<std::size_t>(left ? node.left : node.right);
  }
  return nodes[n].value;
}

struct ForestGrower::State {
  const FeatureBins& bins;
  ForestGrowth growth;
  Grower g;
  std::vector<double> hist;
  ExchangeBuffers exchange;
};

ForestGrower::ForestGrower(const FeatureBins& bins, const ForestGrowth& growth)
    : state_(new State{bins, growth, Grower(bins, growth), {}, {}}) {}

ForestGrower::~ForestGrower() = default;

ForestTree ForestGrower::grow(const ForestRows& rows, std::uint64_t seed,
                              comm::Communicator& comm) {
  const FeatureBins& bins = state_->bins;
  const ForestGrowth& growth = state_->growth;
  Grower& g = state_->g;
  std::vector<double>& hist = state_->hist;
  const std::size_t row_count = rows.weight.size(), F = bins.features();
  DML_CHECK_EQ(rows.binned.size(), row_count * F, "binned rows");
  DML_CHECK_EQ(rows.y.size(), row_count, "labels");
  const std::size_t C = g.channels();
  const std::size_t value_size = growth.classes > 0 ? growth.classes : 1;

  OpenNode root{0, seed, 0, 0, {}, std::vector<double>(C, 0.0)};
  for (std::uint32_t r = 0; r < row_count; ++r)
    if (rows.weight[r] > 0) {
      root.rows.push_back(r);
      g.add_row(rows, r, root.sums.data());
    }
  comm.allreduce(comm::view(root.sums));
  ForestTree tree;
  tree.nodes.push_back({.weight = g.weight(root.sums), .value = {}});
  if (comm.size() == 1) {
    grow_alone(g, rows, std::move(root), tree);
    return in_depth_first_order(std::move(tree));
  }

  // Level by level while the level has too few nodes to spread over the ranks, and each node's
  // histogram costs less to all-reduce than its rows to send (record bytes per unit of weight;
  // a unit is one row on average). Every row is sent once whatever the level it is sent at, so
  // the levels grown together only serve to balance the ranks' share of the subtrees.
  const double row_bytes = static_cast<double>(F + 3 * sizeof(double));
  const std::size_t enough_nodes = 8 * static_cast<std::size_t>(comm.size());
  std::vector<OpenNode> open{std::move(root)}, deferred;
  while (!open.empty()) {
    std::vector<OpenNode> level;
    std::vector<std::vector<int>> features;
    std::size_t size = 0;
    for (OpenNode& o : open) {
      if (!g.may_split(o)) {
        g.make_leaf(tree, o);
        continue;
      }
      auto f = g.candidates(o);
      if (f.empty()) {
        g.make_leaf(tree, o);
        continue;
      }
      const std::size_t h = g.histogram_size(f);
      if (open.size() >= enough_nodes ||
          g.weight(o.sums) * row_bytes < static_cast<double>(h * sizeof(double))) {
        deferred.push_back(std::move(o));
        continue;
      }
      size += h;
      features.push_back(std::move(f));
      level.push_back(std::move(o));
    }
    open.clear();
    if (level.empty()) break;
    hist.resize(size);
    double* at = hist.data();
    for (std::size_t i = 0; i < level.size(); ++i) {
      g.build_histogram(rows, level[i], features[i], at);
      at += g.histogram_size(features[i]);
    }
    comm.allreduce(comm::view(hist));
    at = hist.data();
    for (std::size_t i = 0; i < level.size(); ++i) {
      OpenNode& o = level[i];
      const Split s = g.split_from_histogram(o, features[i], at);
      at += g.histogram_size(features[i]);
      if (s.feature < 0) {
        ++o.pass;
        open.push_back(std::move(o));
        continue;
      }
      auto [left, right] = g.split(tree, o, s, rows);
      open.push_back(std::move(left));
      open.push_back(std::move(right));
    }
  }
  if (!deferred.empty())  // the same nodes on every rank
    grow_deferred(g, bins, rows, deferred, value_size, tree, state_->exchange, comm);
  return in_depth_first_order(std::move(tree));
}

}  // namespace distml::ml
