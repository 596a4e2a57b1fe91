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
  fresh,    // a new run, or a restart of one: the folder must hold no other run's checkpoint
  resuming  // --resume of this very folder: the run continues the folder's run
};

/// Claims `dir` (creating it) for the run `run_id`, and removes the temporary files that its
/// writers left there when they died (NAME.tmp.PID@HOST of this host, of distml's own files),
/// naming them on stderr. `checkpoints` are the checkpoint files now in `dir`. Returns the id
/// the run goes on as: a resuming run continues the folder's run (its owner's id, so that it
/// resumes and prunes that run's checkpoints); a fresh one keeps `run_id`. A fresh run is
/// refused with a UsageError when one of `checkpoints` was written by another run: the message
/// names the run and the newest file, and suggests --resume or another folder for `key` (the
/// config key naming it). A folder whose owner wrote no checkpoint (it failed before its first)
/// is taken over, saying so.
std::string claim_checkpoint_dir(const std::string& dir,
                                 const std::vector<std::string>& checkpoints,
                                 const std::string& run_id, Arrival arrival,
                                 const std::string& key);

/// The run that owns `dir` according to its owner file; empty when it has none.
std::string owner_of(const std::string& dir);

}  // namespace distml::train
