// A checkpoint directory holds the newest few checkpoints, one file per step at which it was
// taken (checkpoint-000000000040.dml), so that a damaged newest file leaves an older one to
// resume from. Files are written atomically (checkpoint_file.h): a name of this pattern is
// always a whole write; its checksum still catches damage done to it afterwards.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace distml::train {

/// The checkpoint taken after `global_step` optimizer steps, inside `dir`.
std::string checkpoint_file(const std::string& dir, std::int64_t global_step);

/// The checkpoint files in `dir`, newest (highest step) first; empty when there is none or no
/// such directory. Other files (temporary ones among them) are ignored.
std::vector<std::string> checkpoints_newest_first(const std::string& dir);

/// Deletes all but the newest `keep` of the checkpoint files of `dir` that the run `run_id`
/// wrote; another run's are never touched (checkpoint_owner.h).
void keep_newest_checkpoints(const std::string& dir, std::int64_t keep, const std::string& run_id);

struct CheckpointRead {
  std::string path;
  std::string payload;
};

/// The newest checkpoint of `dir` whose file reads whole and passes its checksum, among those
/// the run `written_by` wrote when it is given. Each newer one that does not is passed to
/// `skipped(path, why)` and the one before it is tried. CheckpointError naming `dir` and every
/// failure when none is left.
CheckpointRead read_newest_checkpoint(
    const std::string& dir,
    const std::function<void(const std::string&, const std::string&)>& skipped,
    const std::string& written_by = "");

/// The checkpoint files of `dir` that the run `run_id` wrote, newest first.
std::vector<std::string> checkpoints_of_run(const std::string& dir, const std::string& run_id);

}  // namespace distml::train
