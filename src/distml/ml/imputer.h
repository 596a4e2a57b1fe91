// Missing values (NaN, as the readers leave them when allowed) filled per feature with a
// statistic of the training rows over all ranks, as scikit-learn's SimpleImputer with
// strategy "mean" or "median". Fitted on the training rows, stored in the model file, and
// applied the same to test and prediction rows.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "distml/comm/communicator.h"
#include "distml/ml/local_data.h"

namespace distml::ml {

struct Imputer {
  std::string strategy;        // "mean" or "median"
  std::vector<double> values;  // what a missing value of each feature becomes

  /// Replaces every NaN of d.x by its feature's value; DataError when d.features differs.
  void apply(LocalData& d) const;
  /// {"strategy": ..., "values": [...]}.
  nlohmann::json to_json() const;
  /// Reads what to_json wrote; DataError naming what is missing.
  static Imputer from_json(const nlohmann::json& j);
};

/// Collective: the mean or median of each feature's present values over all ranks' rows (the
/// median of an even count is the mean of the middle two, as np.median). The median is exact
/// and moves no values: a radix selection on counts all-reduced in 8 rounds, with 256 counts
/// per feature (2 KiB) beyond the shard, whatever the number of rows. ConfigError for another
/// strategy; DataError naming a feature that is missing on every row.
Imputer fit_imputer(const LocalData& d, const std::string& strategy, comm::Communicator& comm);

}  // namespace distml::ml
