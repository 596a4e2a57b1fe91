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

/// Collective. Rank 0 runs `work`; when it throws, rank 0 throws the same and the other ranks
/// a CheckpointError saying that rank 0 could not `what` (both exit 2, cli/main.cc).
void on_rank0_for_all(const std::function<void()>& work, const std::string& what,
                      comm::Communicator& comm);

/// Collective. Rank 0 writes `encode()` to `path` as a checksummed file of the run `run_id`
/// (atomically); a CheckpointError on every rank when it could not.
void write_on_rank0(const std::string& path, const std::function<std::string()>& encode,
                    const std::string& run_id, comm::Communicator& comm);

/// Collective. Rank 0 reads the newest whole checkpoint of `dir` (checkpoint_dir.h) of the run
/// `written_by` when given, warning on stderr about each newer one it skips, and sends its path
/// and payload to every rank; a CheckpointError on every rank when there is none.
CheckpointRead read_newest_on_rank0(const std::string& dir, comm::Communicator& comm,
                                    const std::string& written_by = "");

}  // namespace distml::train
