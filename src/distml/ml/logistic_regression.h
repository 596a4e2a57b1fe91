// Logistic regression on row-sharded data, binary (one weight vector, class 1 positive) and
// multinomial (softmax, one vector per class) as scikit-learn's LogisticRegression with
// penalty="l2" or "l1". Each objective evaluation computes loss and gradient on the local rows
// and all-reduces them (f64) in one call.
//
// The optimum is sklearn's: objective = C * sum_i loss_i + 0.5 * ||coef||^2 (or ||coef||_1 with
// penalty "l1"), intercept not penalised. The "lbfgs" solver minimises that objective divided
// by C * N (mean loss plus ||coef||^2 / (2 C N), or ||coef||_1 / (C N)), the scaling sklearn
// >= 1.1 uses, so `tol` means what it means there; with "l1" it runs OWL-QN (lbfgs.h). The
// "sgd" solver is distributed minibatch SGD (minibatch_sgd.h) on the same scaled objective,
// "l2" only.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "distml/comm/communicator.h"
#include "distml/ml/linear_fit.h"
#include "distml/ml/local_data.h"

namespace distml::ml {

struct LogisticRegressionOptions {
  double C = 1.0;  // inverse regularisation strength
  int max_iter = 100;
  double tol = 1e-4;  // max-abs (pseudo-)gradient of the scaled objective (lbfgs)
  bool fit_intercept = true;
  std::string penalty = "l2";    // "l2" | "l1" (lbfgs only: OWL-QN)
  std::string solver = "lbfgs";  // "lbfgs" | "sgd"
  // sgd only:
  double learning_rate = 0.1;
  int epochs = 20;
  int batch_size = 32;  // rows per rank per step
  std::uint64_t seed = 0;
};

/// As JSON, one field per option (model files); fields a file lacks take their defaults.
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(LogisticRegressionOptions, C, max_iter, tol,
                                                fit_intercept, penalty, solver, learning_rate,
                                                epochs, batch_size, seed)

/// Sets the option named `key` from its text ("C", "0.5"). ConfigError naming the key (and the
/// valid keys when it is unknown) or the expected value.
void set_option(LogisticRegressionOptions& options, std::string_view key, std::string_view value);

class LogisticRegression {
 public:
  explicit LogisticRegression(LogisticRegressionOptions options = {});

  /// Collective. Fits on every rank's shard; all ranks end with the same model. ConfigError
  /// for invalid options, DataError (on every rank) when a shard is malformed.
  void fit(const LocalData& data, comm::Communicator& comm);

  /// Local. Class id of each row.
  std::vector<std::int64_t> predict(const LocalData& data) const;
  /// Local. rows x num_classes probabilities, row-major.
  std::vector<double> predict_proba(const LocalData& data) const;
  /// Local. rows x outputs() raw scores x . coef + intercept.
  std::vector<double> decision_function(const LocalData& data) const;
  /// Collective. Accuracy over all ranks' rows.
  double score(const LocalData& data, comm::Communicator& comm) const;

  nlohmann::json to_json() const;
  /// DataError when `j` is not a logistic_regression model.
  static LogisticRegression from_json(const nlohmann::json& j);

  const LogisticRegressionOptions& options() const { return options_; }
  std::int64_t num_classes() const { return fit_.num_classes; }
  std::size_t features() const { return fit_.features; }
  /// 1 for two classes, else num_classes.
  std::size_t outputs() const { return fit_.outputs(); }
  const std::vector<double>& coef() const { return fit_.coef; }  // outputs x features
  const std::vector<double>& intercept() const { return fit_.intercept; }
  const std::vector<std::string>& class_names() const { return fit_.class_names; }
  /// C * sum_i loss_i + 0.5 * ||coef||^2 (penalty "l2") or + ||coef||_1 ("l1") at the fitted
  /// weights.
  double objective() const { return fit_.objective; }
  int n_iter() const { return fit_.n_iter; }
  bool converged() const { return fit_.converged; }

  /// Collective. The scaled objective (mean loss + ||coef||^2 / (2 C N), or + ||coef||_1 /
  /// (C N) with penalty "l1") at `w` and the gradient of its smooth part (all of it with "l2",
  /// the mean loss with "l1"), laid out per output as [coef..., intercept if fit_intercept].
  /// For tests and solvers.
  static double scaled_objective(const LocalData& data, const LogisticRegressionOptions& options,
                                 comm::Communicator& comm, const std::vector<double>& w,
                                 std::vector<double>& grad);

 private:
  void check_fitted(std::string_view what) const;

  LogisticRegressionOptions options_;
  LinearFit fit_;
};

}  // namespace distml::ml
