// What happens to row-sharded data between reading and fitting: standardisation with
// statistics computed over all ranks, and a train/test split that does not depend on the
// world size.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <utility>
#include <vector>

#include "distml/comm/communicator.h"
#include "distml/ml/local_data.h"

namespace distml::ml {

/// Per-feature standardisation x' = (x - mean) / scale, as scikit-learn's StandardScaler.
struct Standardizer {
  std::vector<double> mean, scale;

  /// Standardises d.x in place; DataError when d.features differs from mean.size().
  void apply(LocalData& d) const;
  /// {"mean": [...], "scale": [...]}.
  nlohmann::json to_json() const;
  /// Reads what to_json wrote; DataError naming what is missing or inconsistent.
  static Standardizer from_json(const nlohmann::json& j);
};

/// Global mean and population standard deviation of every feature over all ranks' rows
/// (float64 all-reduces, two passes); a constant feature gets scale 1. DataError when there
/// are no rows at all.
Standardizer fit_standardizer(const LocalData& d, comm::Communicator& comm);

/// Splits every rank's rows into (train, test): a row is in test iff a hash of (seed, its
/// global row index) falls below test_fraction, so the split does not depend on the world
/// size. The global row index is the rows of lower ranks plus the local index. Both halves
/// keep features, num_classes, class_names and feature_names, with global_rows recomputed.
/// ConfigError unless 0 <= test_fraction <= 1.
std::pair<LocalData, LocalData> train_test_split(const LocalData& d, double test_fraction,
                                                 std::uint64_t seed, comm::Communicator& comm);

/// Whether global row `index` falls in the test split of train_test_split (for references).
bool in_test_split(std::uint64_t index, double test_fraction, std::uint64_t seed);

}  // namespace distml::ml
