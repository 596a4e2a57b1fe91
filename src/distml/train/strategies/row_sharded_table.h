// An embedding table whose rows are served by the ranks themselves (Parallax's parameter
// servers for sparse variables, one beside each worker): row r belongs to rank r mod world.
// Every rank keeps a full replica for its forward pass; only the rows a step touched move.
//
// One step, as step() runs it:
//  1. The rank's gradient (sparse COO, duplicates summed) is cut by owner into (row id, row)
//     pairs, and the counts go to every rank (one alltoall of one integer each).
//  2. The pairs go to their owners by point-to-point (nothing is sent where a count is 0).
//  3. Each owner sums, per row, what every rank sent (in rank order), divides by the world
//     size (the average gradient, as an all-reduce's avg gives it) and applies SGD to the
//     row: w -= lr * g. Untouched rows get a zero gradient, which plain SGD leaves
//     as they are: the same update as a dense step.
//  4. The owners' updated rows reach every rank (allgatherv of ids, then of rows), which writes
//     them into its replica: all replicas stay identical.
// A rank that sends nothing still takes part in the collectives of 1. and 4.
#pragma once

#include <torch/torch.h>

#include <cstddef>

#include "distml/comm/communicator.h"

namespace distml::train {

class RowShardedTable {
 public:
  /// `table`: [rows, dim], the same on every rank. `tag`: the first of two point-to-point tags
  /// this table uses (ids, then rows).
  RowShardedTable(comm::Communicator& comm, torch::Tensor table, int tag);

  /// Collective: steps 1 to 4 for this rank's `gradient` of the table (sparse or dense;
  /// undefined: no row touched here) with learning rate `lr`. Returns the payload bytes this
  /// rank sent: its pairs for other owners, its updated rows and the counts.
  std::size_t step(const torch::Tensor& gradient, double lr);

 private:
  comm::Communicator& comm_;
  torch::Tensor table_;
  int tag_;
};

}  // namespace distml::train
