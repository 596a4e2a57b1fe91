// One rank's rows of a data set for the classical estimators: each rank holds only its own
// shard, and estimators combine shards with collectives.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace distml::ml {

/// This rank's rows, row-major float64 features and class ids (or regression targets as
/// `targets` when the labels are real numbers), plus what every rank agrees on.
struct LocalData {
  std::size_t rows = 0;         // rows on this rank (may be 0 when there are more ranks than rows)
  std::size_t features = 0;     // the same on every rank
  std::vector<double> x;        // rows * features
  std::vector<std::int64_t> y;  // class id per row (classification); empty for unlabelled data
  std::vector<double> targets;  // real-valued label per row (regression); empty otherwise

  // Agreed across ranks (collectively):
  std::size_t global_rows = 0;             // sum of rows over ranks
  std::int64_t num_classes = 0;            // classes over all shards
  std::vector<std::string> class_names;    // class id i is class_names[i] (CSV, libsvm); empty:
                                           // ids are the labels (IDX)
  std::vector<std::string> feature_names;  // from a CSV header; empty otherwise
  std::string label_name;                  // the CSV label column's name; empty otherwise

  const double* row(std::size_t i) const { return x.data() + i * features; }
};

}  // namespace distml::ml
