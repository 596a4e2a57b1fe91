// A checkpoint folder belongs to one run. The run's id is written in the folder (the file
// `run-id`) and in the header of every checkpoint it writes (checkpoint_file.h), so that a
// fresh run never starts in a folder holding another run's checkpoints (its own newest few
// would be deleted as older than the other run's, or the other run's lost), a restart
// resumes only its own run's checkpoints, and a run deletes only files it wrote.
#pragma once

#include <string>
#include <vector>

#include "distml/core/run_id.h"

namespace distml::train {

/// The file of a checkpoint folder that names the run owning it.
inline constexpr const char* kOwnerFile = "run-id";

/// How a run comes to a checkpoint folder.
enum class Arrival {
  fresh,    // a new run, or a restart of one: the folder must be empty or the run's own
  resuming  // --resume of this very folder: the run continues its checkpoints and takes it over
};

/// Makes `run_id` the owner of `dir` (creating it), and removes the temporary files that
/// writers no longer alive left there (remove_stale_temporary_files), naming them on stderr.
/// `checkpoints` are the checkpoint files now in `dir`. A fresh run is refused with a UsageError
/// when one of them was written by another run, or when `dir` names another owner: the message
/// names the run and the newest checkpoint, and suggests --resume or another folder for `key` (the
/// config key naming it).
void claim_checkpoint_dir(const std::string& dir, const std::vector<std::string>& checkpoints,
                          const std::string& run_id, Arrival arrival, const std::string& key);

/// The run that owns `dir` according to its owner file; empty when it has none.
std::string owner_of(const std::string& dir);

}  // namespace distml::train
