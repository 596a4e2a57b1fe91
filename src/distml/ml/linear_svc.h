// Linear support vector classification on row-sharded data, as scikit-learn's LinearSVC:
// objective 0.5 * ||w||^2 + C * sum_i loss_i with loss "squared_hinge" (default) or "hinge",
// one-vs-rest for more than two classes (one problem per class, class k against the rest),
// one weight vector for two classes (class 1 positive).
//
// As liblinear, the intercept is the weight of an extra feature of constant value
// intercept_scaling, and so is penalised like the other weights.
//
// Solvers: squared hinge is smooth (C^1), so "lbfgs" minimises it exactly, one problem at a
// time, each objective evaluation all-reducing loss and gradient. Hinge is not differentiable;
// it uses "sgd", distributed minibatch subgradient descent (minibatch_sgd.h), whose result
// depends on the world size and the seed. "auto" picks lbfgs for squared hinge, sgd for hinge.
// Both minimise the objective divided by C * N, so `tol` bounds the gradient of the mean loss.
// There is no predict_proba (sklearn's LinearSVC has none); decision_function gives scores.
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

struct LinearSVCOptions {
  double C = 1.0;
  std::string loss = "squared_hinge";  // "squared_hinge" | "hinge"
  int max_iter = 1000;
  double tol = 1e-4;
  bool fit_intercept = true;
  double intercept_scaling = 1.0;
  std::string solver = "auto";  // "auto" | "lbfgs" (squared_hinge only) | "sgd"
  // sgd only:
  double learning_rate = 0.1;
  int epochs = 20;
  int batch_size = 32;  // rows per rank per step
  std::uint64_t seed = 0;
};

/// As JSON, one field per option (model files); fields a file lacks take their defaults.
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(LinearSVCOptions, C, loss, max_iter, tol,
                                                fit_intercept, intercept_scaling, solver,
                                                learning_rate, epochs, batch_size, seed)

/// Sets the option named `key` from its text. ConfigError naming the key (and the valid keys
/// when it is unknown) or the expected value.
void set_option(LinearSVCOptions& options, std::string_view key, std::string_view value);

class LinearSVC {
 public:
  explicit LinearSVC(LinearSVCOptions options = {});

  /// Collective. Fits on every rank's shard; all ranks end with the same model.
  void fit(const LocalData& data, comm::Communicator& comm);

  /// Local. Class id of each row: the sign for two classes, else the largest one-vs-rest score.
  std::vector<std::int64_t> predict(const LocalData& data) const;
  /// Local. rows x outputs() scores x . coef + intercept.
  std::vector<double> decision_function(const LocalData& data) const;
  /// Collective. Accuracy over all ranks' rows.
  double score(const LocalData& data, comm::Communicator& comm) const;

  nlohmann::json to_json() const;
  /// DataError when `j` is not a linear_svc model.
  static LinearSVC from_json(const nlohmann::json& j);

  const LinearSVCOptions& options() const { return options_; }
  std::int64_t num_classes() const { return fit_.num_classes; }
  std::size_t features() const { return fit_.features; }
  std::size_t outputs() const { return fit_.outputs(); }
  const std::vector<double>& coef() const { return fit_.coef; }  // outputs x features
  const std::vector<double>& intercept() const { return fit_.intercept; }
  const std::vector<std::string>& class_names() const { return fit_.class_names; }
  /// 0.5 * ||w||^2 + C * sum_i loss_i, summed over the one-vs-rest problems.
  double objective() const { return fit_.objective; }
  /// lbfgs: the most iterations any problem took; sgd: epochs.
  int n_iter() const { return fit_.n_iter; }
  /// lbfgs: every problem converged; always false for sgd (no convergence test).
  bool converged() const { return fit_.converged; }

  /// Collective. The scaled objective (mean loss + ||w||^2 / (2 C N)) of all problems and its
  /// gradient at `w`, laid out per output as [coef..., intercept weight if fit_intercept].
  static double scaled_objective(const LocalData& data, const LinearSVCOptions& options,
                                 comm::Communicator& comm, const std::vector<double>& w,
                                 std::vector<double>& grad);

 private:
  void check_fitted(std::string_view what) const;

  LinearSVCOptions options_;
  LinearFit fit_;
};

}  // namespace distml::ml
