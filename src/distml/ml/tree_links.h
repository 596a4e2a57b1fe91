// The check that a tree read from a model file can be walked: every split's feature exists
// and its children come after it (so that a walk from the root always ends at a leaf).
#pragma once

#include <cstddef>
#include <string_view>
#include <vector>

#include "distml/core/error.h"

namespace distml::ml {

/// DataError naming `who`, the node and its links unless every split node of `nodes` (with
/// members feature, left, right and is_leaf()) has a feature below `features` and children
/// in (its index, nodes.size()). An empty tree is an error too.
template <class Node>
void check_tree_links(const std::vector<Node>& nodes, std::size_t features, std::string_view who) {
  const int size = static_cast<int>(nodes.size());
  if (size == 0) throw DataError(cat(who, " model: a tree has no nodes"));
  for (int i = 0; i < size; ++i) {
    const Node& n = nodes[static_cast<std::size_t>(i)];
    if (n.is_leaf()) continue;
    if (n.feature >= static_cast<int>(features) || n.left <= i || n.right <= i || n.left >= size ||
        n.right >= size)
      throw DataError(cat(who, " model: node ", i, " has feature ", n.feature, " and children ",
                          n.left, ", ", n.right, " of ", size, " nodes"));
  }
}

}  // namespace distml::ml
