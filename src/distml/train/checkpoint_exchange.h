// How the ranks of a run share one checkpoint: rank 0 alone touches the disk (so ranks need
// not share one) and every rank learns whether it worked, so that no rank waits for one that
// has already failed.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "distml/comm/communicator.h"
#include "distml/train/checkpoint_contents.h"
#include "distml/train/checkpoint_dir.h"

namespace distml::train {

/// Collective. Every rank's own state (its generator, its strategy's), in rank order.
std::vector<RankState> gather_rank_states(const RankState& mine, comm::Communicator& comm);

/// Collective. Rank 0 writes `encode()` to `path` as a checksummed file (atomically); a
/// CheckpointError on every rank when it could not.
void write_on_rank0(const std::string& path, const std::function<std::string()>& encode,
                    comm::Communicator& comm);

/// Collective. Rank 0 reads the newest whole checkpoint of `dir` (checkpoint_dir.h), warning on
/// stderr about each newer one it skips, and sends its path and payload to every rank; a
/// CheckpointError on every rank when there is none.
CheckpointRead read_newest_on_rank0(const std::string& dir, comm::Communicator& comm);

}  // namespace distml::train
