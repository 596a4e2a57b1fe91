// Random forests on row-sharded data, as scikit-learn's RandomForestClassifier / Regressor:
// each tree is grown on a bootstrap sample of the rows with max_features candidate features per
// node (forest_tree.h grows one tree over all ranks); predictions average the trees' leaf
// values (class probabilities or means).
//
// The bootstrap is per row, not per draw: row i gets Poisson(max_samples) copies from a seed of
// (seed, tree, global row index), as Spark MLlib samples, so that a row's weight does not depend
// on the rank holding it. With exact sums and the split rule in forest_tree.h the forest is the
// same, bit for bit, for any world size. Features are binned as in GBDT (at most max_bins bins
// from the distributed sketch of gbdt_binning.h), so splits are at bin edges rather than at
// every midpoint; integer-valued features with at most max_bins values lose nothing.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "distml/comm/communicator.h"
#include "distml/ml/forest_tree.h"
#include "distml/ml/local_data.h"

namespace distml::ml {

struct RandomForestOptions {
  /// auto | gini | squared_error. auto: gini for class ids, squared_error for targets.
  std::string criterion = "auto";
  int n_estimators = 100;
  int max_depth = 0;  // 0: no limit
  int min_samples_leaf = 1;
  /// Candidates per node: auto (sqrt for gini, all for squared_error), sqrt, log2, all, a
  /// fraction of the features ("0.3") or a count ("12").
  std::string max_features = "auto";
  bool bootstrap = true;
  double max_samples = 1;  // each row's mean weight in a tree's bootstrap
  int max_bins = 255;      // at most 255
  std::uint64_t seed = 0;
};

NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(RandomForestOptions, criterion, n_estimators,
                                                max_depth, min_samples_leaf, max_features,
                                                bootstrap, max_samples, max_bins, seed)

/// Sets the option named `key` from its text; ConfigError naming the key (and the valid keys
/// when it is unknown) or the expected value; `options` is then unchanged.
void set_option(RandomForestOptions& options, std::string_view key, std::string_view value);

class RandomForest {
 public:
  explicit RandomForest(RandomForestOptions options = {});

  /// Collective. Fits on every rank's shard: class ids (gini) or targets (squared_error). All
  /// ranks end with the same forest.
  void fit(const LocalData& data, comm::Communicator& comm);

  /// Local. Class id of each row (classifiers).
  std::vector<std::int64_t> predict(const LocalData& data) const;
  /// Local. rows x num_classes mean leaf class distributions (classifiers).
  std::vector<double> predict_proba(const LocalData& data) const;
  /// Local. The mean of the trees' predictions (regression).
  std::vector<double> predict_values(const LocalData& data) const;
  /// Collective. Accuracy over all ranks' rows, or R^2 for squared_error.
  double score(const LocalData& data, comm::Communicator& comm) const;

  nlohmann::json to_json() const;
  /// DataError when `j` is not a random_forest model.
  static RandomForest from_json(const nlohmann::json& j);

  const RandomForestOptions& options() const { return options_; }
  /// The criterion fitted (before fit: the option), named as GBDT's loss for the CLI:
  /// "squared_error" for regression.
  const std::string& loss() const { return criterion_.empty() ? options_.criterion : criterion_; }
  std::int64_t num_classes() const { return num_classes_; }
  const std::vector<ForestTree>& trees() const { return trees_; }
  /// Each feature's mean share of its tree's impurity decrease, normalised to sum 1 (as
  /// scikit-learn's feature_importances_).
  std::vector<double> feature_importances() const;

 private:
  void check_fitted(std::string_view what) const;
  bool classifier() const { return criterion_ == "gini"; }
  // rows x outputs: the mean of the trees' leaf values.
  std::vector<double> mean_leaf_values(const LocalData& data) const;

  RandomForestOptions options_;
  std::string criterion_;
  std::int64_t num_classes_ = 0;
  std::size_t features_ = 0;
  std::vector<ForestTree> trees_;
};

}  // namespace distml::ml
