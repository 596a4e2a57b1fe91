// One interface over the classical estimators, so that `distml fit` and `distml predict` treat
// k-means, logistic regression, linear SVM, naive Bayes and GBDT alike.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "distml/comm/communicator.h"
#include "distml/ml/local_data.h"

namespace distml::ml {

class Estimator {
 public:
  virtual ~Estimator() = default;
  /// Its name, as model files and done lines write it.
  virtual const std::string& name() const = 0;
  /// Sets an option by its name (`k`, `C`, `max_iter`, ...); ConfigError naming the valid ones.
  virtual void set(const std::string& key, const std::string& value) = 0;
  /// Collective: every rank passes its own rows.
  virtual void fit(const LocalData& data, comm::Communicator& comm) = 0;
  /// Class ids (cluster ids for k-means) of this rank's rows; classifiers and k-means only.
  virtual std::vector<std::int64_t> predict(const LocalData& data) const = 0;
  /// Whether the labels are real-valued targets (LocalData::targets), not class ids: GBDT
  /// with loss = squared_error.
  virtual bool regression() const { return false; }
  /// Predicted values of this rank's rows; regression models only.
  virtual std::vector<double> predict_values(const LocalData& data) const = 0;
  /// Whether predict_proba gives class probabilities (logistic regression, naive Bayes, GBDT
  /// classifiers).
  virtual bool gives_probabilities() const = 0;
  /// Local: rows x classes probabilities, row-major; UsageError unless gives_probabilities().
  virtual std::vector<double> predict_proba(const LocalData& data) const = 0;
  /// Collective: accuracy over all ranks' rows; R^2 for regression; for k-means, minus the
  /// inertia (as scikit-learn's score).
  virtual double score(const LocalData& data, comm::Communicator& comm) const = 0;
  /// Whether fit needs labels (k-means does not).
  virtual bool supervised() const { return true; }
  /// Whether fit and predict take sparse rows (LocalData::sparse) as they are; the others need
  /// them densified() first.
  virtual bool takes_sparse() const { return false; }
  /// Whether fit and predict take missing values (NaN) as they are; the others need them
  /// imputed first.
  virtual bool takes_missing() const { return false; }
  /// Iterations (or boosting rounds) the last fit took.
  virtual int iterations() const = 0;
  /// The fitted model, with "estimator" naming it, for save_model_file.
  virtual nlohmann::json to_json() const = 0;
};

/// The estimator names, in the order messages list them.
const std::vector<std::string>& estimator_names();
/// The names with their command-line aliases, for messages and help: "kmeans,
/// logistic_regression (logreg), ...".
std::string estimator_list();
/// A fresh estimator with default options, by name or alias; ConfigError listing the names
/// otherwise.
std::unique_ptr<Estimator> make_estimator(const std::string& name);
/// The estimator a model file holds (its "estimator" field); DataError when unknown.
std::unique_ptr<Estimator> estimator_from_json(const nlohmann::json& model);

}  // namespace distml::ml
