// The file layer under checkpoints and weight export: whole files written atomically (temporary
// file, fsync, rename, fsync of the directory), so a crash leaves either the old file or the new
// one, never half of either.
//
// A checked file is a 36-byte header followed by the payload:
//   bytes 0..7    magic "DMLCKPT2"
//   bytes 8..15   payload size, u64 little-endian
//   bytes 16..19  CRC-32 (zlib) of bytes 20.. (the writer's run id and the payload), u32 LE
//   bytes 20..35  the id of the run that wrote it (core/run_id.h), padded with NULs
// so that the run a file belongs to is known from its first 36 bytes. Files of the first
// version (magic "DMLCKPT1", a 20-byte header without the run id) are still read; their run id
// is empty.
// An exported tensor file has no header: it is the torch.save zip format that Python's
// torch.load(path) reads as a dict of tensors.
#pragma once

#include <torch/torch.h>

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "distml/core/run_id.h"

namespace distml::train {

/// Name → tensor, in the order the entries are written and read back.
using NamedTensors = std::vector<std::pair<std::string, torch::Tensor>>;

/// Atomically replaces `path` with a checked file holding `payload`, written by the run
/// `run_id` (at most kRunIdBytes), creating the parent directory if missing. CheckpointError
/// naming the path and the OS error otherwise; then the temporary file is gone and an existing
/// `path` is untouched.
void write_checked_file(const std::string& path, std::string_view payload,
                        std::string_view run_id = {});

/// The payload of a checked file. CheckpointError naming the path and what is wrong: missing or
/// unreadable, not a distml checkpoint, truncated, or a checksum mismatch.
std::string read_checked_file(const std::string& path);

/// The id of the run that wrote the checked file `path`, read from its header alone; empty for
/// a file of the first version, and nullopt when `path` is not a readable checked file.
std::optional<std::string> checked_file_run_id(const std::string& path);

/// Atomically writes the tensors as a dict that Python's torch.load(path) reads. Each tensor is
/// saved detached, contiguous and cloned. CheckpointError on a repeated name or a write failure.
void export_tensors(const std::string& path, const NamedTensors& tensors);

/// Reads a file written by export_tensors (or a torch.save of a dict of tensors) back in its
/// order. CheckpointError naming the path when it is unreadable or not such a dict.
NamedTensors import_tensors(const std::string& path);

}  // namespace distml::train
