// Histogram gradient-boosted trees on row-sharded data, as scikit-learn's
// HistGradientBoostingClassifier / Regressor and LightGBM: features are cut once into at most
// max_bins bins (gbdt_binning.h), then every round grows one tree (binary log loss, squared
// error) or one tree per class (softmax) on the gradients of the loss, all ranks together
// (gbdt_tree.h walks through one tree).
//
// World size: gradient sums are exact (exact_sum.h), so when no feature has more than
// 4 * max_bins distinct values (integer-valued or categorical data) the model is bit-identical
// for every world size. For continuous data the bin edges come from per-rank quantile summaries
// and may differ slightly between world sizes, and so may the trees. A missing value is NaN:
// it has a bin of its own and each split learns where it goes (gbdt_tree.h). An entry that a
// sparse row does not store is missing too, not 0, in fitting and predicting: XGBoost reads a
// LibSVM file so, and the XGBoost export (gbdt_xgboost.h) then predicts as distml does.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "distml/comm/communicator.h"
#include "distml/ml/gbdt_tree.h"
#include "distml/ml/local_data.h"

namespace distml::ml {

struct GBDTOptions {
  /// auto | log_loss | squared_error. auto: log_loss for class ids, squared_error for targets.
  std::string loss = "auto";
  int max_iter = 100;  // boosting rounds
  double learning_rate = 0.1;
  int max_leaf_nodes = 31;          // 0: no limit (then max_depth must be set)
  int max_depth = 0;                // 0: no limit; edges from the root to the deepest leaf
  std::string growth = "leafwise";  // leafwise (largest gain first) | depthwise
  int min_samples_leaf = 20;
  double min_child_weight = 1e-3;  // least hessian on each side of a split (XGBoost's name)
  double l2_regularization = 0;
  double subsample = 1;         // share of the rows each round grows on (by global row index)
  double colsample_bytree = 1;  // share of the features each tree may split on
  int max_bins = 255;           // at most 255
  bool early_stopping = false;
  double validation_fraction = 0.1;  // rows held out by a hash of (seed, global row index)
  int n_iter_no_change = 10;
  double tol = 1e-7;  // improvement of the validation loss that counts
  std::uint64_t seed = 0;
};

/// As JSON, one field per option (model files); fields a file lacks take their defaults.
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(GBDTOptions, loss, max_iter, learning_rate,
                                                max_leaf_nodes, max_depth, growth, min_samples_leaf,
                                                min_child_weight, l2_regularization, subsample,
                                                colsample_bytree, max_bins, early_stopping,
                                                validation_fraction, n_iter_no_change, tol, seed)

/// Sets the option named `key` from its text ("max_iter", "50"). ConfigError naming the key
/// (and the valid keys when it is unknown) or the expected value; `options` is then unchanged.
void set_option(GBDTOptions& options, std::string_view key, std::string_view value);

class GBDT {
 public:
  explicit GBDT(GBDTOptions options = {});

  /// Collective. Fits on every rank's shard: class ids (log_loss) or targets (squared_error).
  /// All ranks end with the same model. ConfigError for invalid options, DataError (on every
  /// rank) when a shard is malformed.
  void fit(const LocalData& data, comm::Communicator& comm);

  /// Local. Class id of each row (classification models only).
  std::vector<std::int64_t> predict(const LocalData& data) const;
  /// Local. The predicted value of each row (squared_error models only).
  std::vector<double> predict_values(const LocalData& data) const;
  /// Local. rows x num_classes probabilities, row-major (classification models only).
  std::vector<double> predict_proba(const LocalData& data) const;
  /// Local. rows x outputs() raw scores: baseline plus the trees' outputs.
  std::vector<double> decision_function(const LocalData& data) const;
  /// Collective. Accuracy over all ranks' rows, or R^2 for squared_error.
  double score(const LocalData& data, comm::Communicator& comm) const;

  nlohmann::json to_json() const;
  /// DataError when `j` is not a gbdt model.
  static GBDT from_json(const nlohmann::json& j);

  const GBDTOptions& options() const { return options_; }
  /// The loss fitted: log_loss or squared_error (auto resolved); before fit, the option.
  const std::string& loss() const { return loss_.empty() ? options_.loss : loss_; }
  std::int64_t num_classes() const { return num_classes_; }
  std::size_t features() const { return features_; }
  /// Trees per round: num_classes for softmax, else 1.
  std::size_t outputs() const { return baseline_.size(); }
  /// Rounds built.
  int iterations() const { return iterations_; }
  /// Round-major: tree k of round i is trees()[i * outputs() + k].
  const std::vector<GBDTTree>& trees() const { return trees_; }
  const std::vector<double>& baseline() const { return baseline_; }
  /// Each feature's share of the total split gain over all trees (sums to 1; all 0 without a
  /// split), as XGBoost's "total_gain" importance normalised.
  std::vector<double> feature_importances() const;
  /// Mean validation loss before the first round and after each (early_stopping only).
  const std::vector<double>& validation_loss() const { return validation_loss_; }

 private:
  void check_fitted(std::string_view what) const;
  bool classifier() const { return loss_ == "log_loss"; }

  GBDTOptions options_;
  std::string loss_;
  std::int64_t num_classes_ = 0;
  std::size_t features_ = 0;
  std::vector<std::string> class_names_;
  std::vector<double> baseline_;
  std::vector<GBDTTree> trees_;
  int iterations_ = 0;
  std::vector<double> validation_loss_;
};

}  // namespace distml::ml
