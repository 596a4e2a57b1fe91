// The data a training run needs, loaded from the [data] section of its config: a train and a
// test split, and what kind of task they make (classification, or next-character prediction).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "distml/data/dataset.h"
#include "distml/train/config.h"

namespace distml::train {

enum class TaskKind {
  classify,        // features -> one class id per sample
  language_model,  // each sample is seq_len + 1 character ids: inputs, then targets shifted by one
};

struct TaskData {
  TaskKind kind = TaskKind::classify;
  data::Dataset train, test;
  std::int64_t num_classes = 0;  // classify: classes (0 for float targets); language_model:
                                 // vocabulary size
  /// Set for data that each rank reads in part (npz): `train` and `test` then hold shapes and
  /// row counts but no rows, and shard(rank, ranks) reads rank `rank`'s block of each. The
  /// trainer shuffles within its block (see trainer.h). Null for data held whole.
  std::function<TaskData(int rank, int ranks)> shard;
  bool is_shard = false;  // true for what shard() returned
};

/// Loads the dataset `config` names. DataError naming the missing or bad file (and `make
/// data` for the bundled data sets); labels outside [0, num_classes) are a DataError too.
/// Text corpora become windows of seq_len + 1 character ids stored as floats (exact below
/// 2^24); the last test_fraction of the windows is the test split. An npz file's arrays are
/// checked here (DataError naming the file and array) and its rows read by shard(); without
/// data.test_path its last test_fraction of rows is the test split.
TaskData load_task_data(const DataConfig& config, std::uint64_t seed);

}  // namespace distml::train
