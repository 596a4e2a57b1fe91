// How ranks agree on errors and small values: every collective check of the classical
// estimators and readers goes through these, so all ranks throw the same error together
// instead of some waiting for the others.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "distml/comm/communicator.h"

namespace distml::ml {

/// Collective. Every rank passes its error ("" if none); if any rank has one, every rank
/// throws DataError with the message of the lowest failing rank, followed by "(found by rank
/// R of P)" when P > 1.
void throw_if_any_rank_failed(comm::Communicator& comm, const std::string& local_error);

/// Collective. `v` reduced over the ranks with `op`.
std::int64_t allreduce_i64(comm::Communicator& comm, std::int64_t v, comm::ReduceOp op);

/// Collective. Every rank's `v`, in rank order.
std::vector<std::int64_t> allgather_i64(comm::Communicator& comm, std::int64_t v);

/// Collective. The sum of `v` over the ranks below this one.
std::int64_t exclusive_prefix(comm::Communicator& comm, std::int64_t v);

}  // namespace distml::ml
