// A Gaussian mixture fitted by expectation-maximisation over row-sharded data, as
// scikit-learn's GaussianMixture (full, diagonal or spherical covariances, reg_covar, k-means or
// k-means++ initialisation, n_init, the mean log-likelihood as score).
//
// One EM iteration, every rank:
//  1. E-step on its rows: log w_k + log N(x | mu_k, Sigma_k) for every component (through the
//     Cholesky factor of Sigma_k), their log-sum-exp (the row's log-likelihood) and the
//     responsibilities r_ik.
//  2. One all-reduce of [sum_i r_ik | sum_i r_ik x_i | sum_i log-likelihood]: the weights
//     N_k / N and means sum r x / N_k (N_k gets 10 machine epsilons, as scikit-learn), and the
//     mean log-likelihood of the parameters the E-step used.
//  3. A second pass and all-reduce for the covariances around the new means, sum_i r_ik
//     (x_i - mu_k)(x_i - mu_k)^T / N_k (its diagonal, or the mean of its diagonal), plus
//     reg_covar on the diagonal. Two passes, not sum r x x^T - N mu mu^T, which cancels.
//  4. Stop when the mean log-likelihood changed by less than tol.
// Initialisation: responsibilities one-hot on the labels of k-means (init_params "kmeans",
// one k-means++ run as scikit-learn's) or on the nearest of k-means++ centres ("k-means++"),
// then an M-step. Of n_init runs the one with the largest final log-likelihood is kept.
// Every decision uses all-reduced values, so all ranks hold the same model.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "distml/comm/communicator.h"
#include "distml/ml/local_data.h"

namespace distml::ml {

struct GaussianMixtureOptions {
  int n_components = 1;
  std::string covariance_type = "full";  // | "diag" | "spherical"
  double tol = 1e-3;                     // on the change of the mean log-likelihood
  double reg_covar = 1e-6;               // added to the covariances' diagonal
  int max_iter = 100;
  int n_init = 1;
  std::string init_params = "kmeans";  // | "k-means++"
  std::uint64_t seed = 0;
};

NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(GaussianMixtureOptions, n_components,
                                                covariance_type, tol, reg_covar, max_iter, n_init,
                                                init_params, seed)

/// Sets the option named `key` from its text. ConfigError naming the key (and the valid keys
/// when it is unknown) or the expected value.
void set_option(GaussianMixtureOptions& options, std::string_view key, std::string_view value);

class GaussianMixture {
 public:
  explicit GaussianMixture(GaussianMixtureOptions options = {});

  /// Collective. ConfigError for n_components above the rows; DataError when a component's
  /// covariance is not positive definite (naming reg_covar) or the shards disagree.
  void fit(const LocalData& data, comm::Communicator& comm);

  /// Local. The most probable component of each row.
  std::vector<std::int64_t> predict(const LocalData& data) const;
  /// Local. rows x n_components responsibilities, row-major.
  std::vector<double> predict_proba(const LocalData& data) const;
  /// Collective. The mean log-likelihood per row over all ranks' rows (scikit-learn's score).
  double score(const LocalData& data, comm::Communicator& comm) const;

  nlohmann::json to_json() const;
  /// DataError when `j` is not a gaussian_mixture model.
  static GaussianMixture from_json(const nlohmann::json& j);

  const GaussianMixtureOptions& options() const { return options_; }
  const std::vector<double>& weights() const { return weights_; }  // n_components
  const std::vector<double>& means() const { return means_; }      // n_components x features
  /// full: n_components x features x features; diag: n_components x features; spherical:
  /// n_components.
  const std::vector<double>& covariances() const { return covariances_; }
  int n_iter() const { return n_iter_; }
  bool converged() const { return converged_; }
  /// The mean log-likelihood of the training rows under the parameters of the last E-step.
  double lower_bound() const { return lower_bound_; }

 private:
  /// rows x n_components log w_k + log N(x_i | mu_k, Sigma_k).
  std::vector<double> log_weighted_densities(const LocalData& data) const;
  /// Steps 2-3 from responsibilities; returns the all-reduced mean of `log_likelihoods` (the
  /// rows' log-likelihoods under the parameters that gave `resp`).
  double m_step(const LocalData& data, comm::Communicator& comm, const std::vector<double>& resp,
                double log_likelihoods);
  /// The Cholesky factors of the covariances; DataError when one is not positive definite.
  void factor();
  void check_fitted(std::string_view what) const;

  GaussianMixtureOptions options_;
  std::size_t features_ = 0;
  std::vector<double> weights_, means_, covariances_;
  std::vector<double> cholesky_;  // full: lower factors, d x d each; else square roots
  int n_iter_ = 0;
  bool converged_ = false;
  double lower_bound_ = 0;
};

}  // namespace distml::ml
