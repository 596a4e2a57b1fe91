// Naive Bayes classifiers on row-sharded data, as scikit-learn's GaussianNB and MultinomialNB.
// Both fit from all-reduced (f64) per-class sufficient statistics, so a fit costs a pass over
// the local rows and one or two small all-reduces, and every rank ends with the same model.
//
// GaussianNB takes two passes: counts and sums first (giving the means), then sums of squared
// deviations from those means. Sums of squares about zero (E[x^2] - E[x]^2) would be one pass
// but lose every digit of the variance of a feature whose mean is large against its spread.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "distml/comm/communicator.h"
#include "distml/ml/local_data.h"

namespace distml::ml {

struct GaussianNBOptions {
  /// Added to every variance, as a fraction of the largest variance of any feature over all
  /// rows (sklearn's epsilon_ = var_smoothing * max_j var(x_j)).
  double var_smoothing = 1e-9;
};

/// Sets the option named `key` from its text; ConfigError naming the key and the valid keys.
void set_option(GaussianNBOptions& options, std::string_view key, std::string_view value);

class GaussianNB {
 public:
  explicit GaussianNB(GaussianNBOptions options = {});

  /// Collective. Class priors from counts; per-class means and (biased) variances.
  void fit(const LocalData& data, comm::Communicator& comm);

  /// Local. Class id of each row.
  std::vector<std::int64_t> predict(const LocalData& data) const;
  /// Local. rows x num_classes probabilities, row-major.
  std::vector<double> predict_proba(const LocalData& data) const;
  /// Local. rows x num_classes joint log-likelihoods log P(class) + log P(x | class).
  std::vector<double> joint_log_likelihood(const LocalData& data) const;
  /// Collective. Accuracy over all ranks' rows.
  double score(const LocalData& data, comm::Communicator& comm) const;

  nlohmann::json to_json() const;
  /// DataError when `j` is not a gaussian_nb model.
  static GaussianNB from_json(const nlohmann::json& j);

  const GaussianNBOptions& options() const { return options_; }
  std::int64_t num_classes() const { return num_classes_; }
  std::size_t features() const { return features_; }
  const std::vector<double>& class_count() const { return class_count_; }
  const std::vector<double>& class_prior() const { return class_prior_; }
  const std::vector<double>& theta() const { return theta_; }  // num_classes x features
  const std::vector<double>& var() const { return var_; }      // num_classes x features
  double epsilon() const { return epsilon_; }
  const std::vector<std::string>& class_names() const { return class_names_; }

 private:
  GaussianNBOptions options_;
  std::int64_t num_classes_ = 0;
  std::size_t features_ = 0;
  std::vector<double> class_count_, class_prior_, theta_, var_;
  double epsilon_ = 0;
  std::vector<std::string> class_names_;
};

struct MultinomialNBOptions {
  double alpha = 1.0;     // additive (Laplace/Lidstone) smoothing
  bool fit_prior = true;  // false: uniform class prior
};

/// Sets the option named `key` from its text; ConfigError naming the key and the valid keys.
void set_option(MultinomialNBOptions& options, std::string_view key, std::string_view value);

class MultinomialNB {
 public:
  explicit MultinomialNB(MultinomialNBOptions options = {});

  /// Collective. Features must be non-negative (counts or frequencies): DataError on every
  /// rank naming the first offending rank and row otherwise.
  void fit(const LocalData& data, comm::Communicator& comm);

  std::vector<std::int64_t> predict(const LocalData& data) const;
  std::vector<double> predict_proba(const LocalData& data) const;
  std::vector<double> joint_log_likelihood(const LocalData& data) const;
  double score(const LocalData& data, comm::Communicator& comm) const;

  nlohmann::json to_json() const;
  /// DataError when `j` is not a multinomial_nb model.
  static MultinomialNB from_json(const nlohmann::json& j);

  const MultinomialNBOptions& options() const { return options_; }
  std::int64_t num_classes() const { return num_classes_; }
  std::size_t features() const { return features_; }
  const std::vector<double>& class_count() const { return class_count_; }
  const std::vector<double>& feature_count() const { return feature_count_; }  // K x features
  const std::vector<double>& class_log_prior() const { return class_log_prior_; }
  const std::vector<double>& feature_log_prob() const { return feature_log_prob_; }
  const std::vector<std::string>& class_names() const { return class_names_; }

 private:
  MultinomialNBOptions options_;
  std::int64_t num_classes_ = 0;
  std::size_t features_ = 0;
  std::vector<double> class_count_, feature_count_, class_log_prior_, feature_log_prob_;
  std::vector<std::string> class_names_;
};

}  // namespace distml::ml
