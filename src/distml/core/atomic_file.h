// Whole files written so that a crash leaves the old file or the new one, never half of
// either (checkpoints, exported weights, model files), and whole files read back.
#pragma once

#include <functional>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

namespace distml {

/// Replaces `path` by `pieces` written one after another, through a temporary file in the same
/// directory (`path`.tmp.PID@HOST) that is fsynced and renamed; creates the parent directory if
/// missing.
/// CheckpointError naming the path and the OS error; then `path` is untouched.
void write_file_atomically(const std::string& path, std::initializer_list<std::string_view> pieces);

/// Removes the temporary files of write_file_atomically in `dir` (NAME.tmp.PID@HOST) whose
/// writer is dead: written on this host by a process that no longer runs, and named as
/// `ours(file name)` accepts. Returns their paths; a file that will not go is left.
std::vector<std::string> remove_stale_temporary_files(
    const std::string& dir, const std::function<bool(const std::string&)>& ours);

/// Checks, before a run's work, that it can write where it will at the end: creates `folder`
/// if missing and a probe file in it, then removes the probe. UsageError "`what`: cannot write
/// in FOLDER (the OS error)" otherwise, so that a run is not lost to a path found unwritable
/// when its result is saved.
void check_writable_folder(const std::string& folder, const std::string& what);
/// The same for the folder that will hold the file `path` (the current one for a bare name).
void check_writable_file(const std::string& path, const std::string& what);

/// The bytes of `path`; CheckpointError naming it and the OS error.
std::vector<char> read_whole_file(const std::string& path);

}  // namespace distml
