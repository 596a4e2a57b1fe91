// Priority trees of prioritized replay: a sum tree that draws a leaf in proportion to its
// priority in O(log n), and a min tree that keeps the smallest priority for importance weights.
// Both are array-based complete binary trees: node j has children 2j and 2j+1, leaves from size.
#pragma once

#include <cstddef>
#include <vector>

namespace distml::rl {

/// Non-negative double priorities over `capacity` leaves (all 0 at first), with prefix-sum search.
class SumTree {
 public:
  explicit SumTree(std::size_t capacity);

  /// Sets leaf i to priority p in O(log n); Error on a negative, NaN or infinite p or i out of
  /// range.
  void set(std::size_t i, double p);
  /// The priority of leaf i.
  double get(std::size_t i) const;
  /// The sum of all priorities.
  double total() const { return nodes_[1]; }
  /// The number of leaves.
  std::size_t capacity() const { return capacity_; }
  /// The leaf i whose prefix sum first exceeds `mass` (sum_{j<=i} p_j > mass), for mass in
  /// [0, total()); a mass at or past total() from rounding gives the last non-zero leaf, and a
  /// zero-priority leaf is never returned. Error on an all-zero tree or a negative/NaN mass.
  std::size_t find(double mass) const;

 private:
  std::size_t capacity_;
  std::size_t leaves_;         // capacity rounded up to a power of two
  std::vector<double> nodes_;  // 2 * leaves_; nodes_[1] is the root, nodes_[0] unused
};

/// The minimum over `capacity` leaves, each +infinity until set.
class MinTree {
 public:
  explicit MinTree(std::size_t capacity);

  /// Sets leaf i to p in O(log n); Error on NaN or i out of range.
  void set(std::size_t i, double p);
  /// The smallest leaf; +infinity while none is set.
  double min() const { return nodes_[1]; }

 private:
  std::size_t capacity_;
  std::size_t leaves_;
  std::vector<double> nodes_;
};

}  // namespace distml::rl
