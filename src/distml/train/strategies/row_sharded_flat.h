// A row-sharded table (row_sharded_table.h) over raw memory, for callers without torch (the
// Python module's DistributedOptimizer under strategy hybrid). Defined in row_sharded_table.cc.
#pragma once

#include <cstddef>
#include <cstdint>

#include "distml/comm/communicator.h"

namespace distml::train {

/// The hybrid strategy's point-to-point tags: table i (in the model's parameter order) uses the
/// two from kFirstTableTag + 2 i, clear of other traffic.
inline constexpr int kFirstTableTag = 64;

/// Collective: RowShardedTable::step for `table` (a contiguous [rows, dim] float32 or float64
/// table, updated in place) with this rank's gradient given as `ids.count` row ids (int64;
/// a repeated id's rows are summed) and their rows `values` ([ids.count, dim], the table's
/// dtype). Returns the payload bytes this rank sent.
std::size_t step_flat_table(comm::Communicator& comm, comm::Buffer table, std::int64_t dim,
                            comm::ConstBuffer ids, comm::ConstBuffer values, double lr, int tag);

}  // namespace distml::train
