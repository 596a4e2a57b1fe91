#include "distml/rl/sum_tree.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

#include "distml/core/error.h"

namespace distml::rl {
namespace {

std::size_t leaves_for(const char* what, std::size_t capacity) {
  if (capacity == 0) throw Error(cat(what, ": capacity must be at least 1"));
  return std::bit_ceil(capacity);
}

void check_index(const char* what, std::size_t i, std::size_t capacity) {
  if (i >= capacity) {
    throw Error(cat(what, ": leaf ", i, " out of range for capacity ", capacity));
  }
}

}  // namespace

SumTree::SumTree(std::size_t capacity)
    : capacity_(capacity), leaves_(leaves_for("SumTree", capacity)), nodes_(2 * leaves_, 0.0) {}

void SumTree::set(std::size_t i, double p) {
  check_index("SumTree::set", i, capacity_);
  if (!(p >= 0) || std::isinf(p)) {
    throw Error(cat("SumTree::set: priority of leaf ", i, " must be finite and >= 0, got ", p));
  }
  std::size_t j = leaves_ + i;
  nodes_[j] = p;
  // Recompute each parent from its children instead of adding the change, so repeated updates
  // cannot drift the sums away from the leaves.
  for (j /= 2; j >= 1; j /= 2) nodes_[j] = nodes_[2 * j] + nodes_[2 * j + 1];
}

double SumTree::get(std::size_t i) const {
  check_index("SumTree::get", i, capacity_);
  return nodes_[leaves_ + i];
}

std::size_t SumTree::find(double mass) const {
  if (!(total() > 0)) throw Error("SumTree::find: every priority is zero");
  if (!(mass >= 0)) throw Error(cat("SumTree::find: mass must be >= 0, got ", mass));
  std::size_t j = 1;
  while (j < leaves_) {
    const double left = nodes_[2 * j], right = nodes_[2 * j + 1];
    // A non-zero node has a non-zero child; never step into an empty subtree, which is what
    // clamps a mass at or past the (rounded) total to the last non-zero leaf.
    if (right == 0 || (left > 0 && mass < left)) {
      j = 2 * j;
    } else {
      mass -= left;
      j = 2 * j + 1;
    }
  }
  return j - leaves_;
}

MinTree::MinTree(std::size_t capacity)
    : capacity_(capacity),
      leaves_(leaves_for("MinTree", capacity)),
      nodes_(2 * leaves_, std::numeric_limits<double>::infinity()) {}

void MinTree::set(std::size_t i, double p) {
  check_index("MinTree::set", i, capacity_);
  if (std::isnan(p)) throw Error(cat("MinTree::set: value of leaf ", i, " is NaN"));
  std::size_t j = leaves_ + i;
  nodes_[j] = p;
  for (j /= 2; j >= 1; j /= 2) nodes_[j] = std::min(nodes_[2 * j], nodes_[2 * j + 1]);
}

}  // namespace distml::rl
