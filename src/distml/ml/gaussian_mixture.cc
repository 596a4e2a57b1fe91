#include "distml/ml/gaussian_mixture.h"

#include <cmath>
#include <limits>
#include <numbers>

#include "distml/core/error.h"
#include "distml/ml/estimator_support.h"
#include "distml/ml/kmeans.h"
#include "distml/ml/kmeans_init.h"
#include "distml/ml/kmeans_local.h"

namespace distml::ml {
namespace {

constexpr std::string_view kMixture = "gaussian_mixture";
constexpr std::uint64_t kRunStream = 0x676d6d;  // derive_seed stream of the n_init runs

void validate(const GaussianMixtureOptions& o) {
  require_option(o.n_components >= 1, kMixture, "n_components", "at least 1");
  require_option(o.covariance_type == "full" || o.covariance_type == "diag" ||
                     o.covariance_type == "spherical",
                 kMixture, "covariance_type", "\"full\", \"diag\" or \"spherical\"");
  require_option(o.tol >= 0, kMixture, "tol", "non-negative");
  require_option(o.reg_covar >= 0, kMixture, "reg_covar", "non-negative");
  require_option(o.max_iter >= 1, kMixture, "max_iter", "at least 1");
  require_option(o.n_init >= 1, kMixture, "n_init", "at least 1");
  require_option(o.init_params == "kmeans" || o.init_params == "k-means++", kMixture, "init_params",
                 "\"kmeans\" or \"k-means++\"");
}

// Values per component's covariance.
std::size_t covariance_size(const std::string& type, std::size_t d) {
  return type == "full" ? d * d : type == "diag" ? d : 1;
}

// One-hot responsibilities of the initial clustering: k-means' labels, or the nearest of the
// k-means++ centres.
std::vector<double> initial_responsibilities(const LocalData& data, comm::Communicator& comm,
                                             const GaussianMixtureOptions& o, std::uint64_t seed) {
  const auto k = static_cast<std::size_t>(o.n_components);
  std::vector<std::int64_t> labels(data.rows);
  if (o.init_params == "kmeans") {
    KMeansOptions ko;
    ko.k = o.n_components;
    ko.init = "k-means++";
    ko.seed = seed;
    KMeans kmeans(ko);
    kmeans.fit(data, comm);
    labels = kmeans.predict(data);
  } else {
    const ShardLayout layout = ShardLayout::gather(data, comm);
    const auto centres = init_kmeans_plus_plus(data, layout, comm, k, seed);
    std::vector<double> dist2(data.rows);
    if (data.rows > 0)
      assign_nearest({data.x.data(), data.rows, data.features}, {centres.data(), k, data.features},
                     labels.data(), dist2.data());
  }
  std::vector<double> resp(data.rows * k, 0.0);
  for (std::size_t i = 0; i < data.rows; ++i) resp[i * k + static_cast<std::size_t>(labels[i])] = 1;
  return resp;
}

}  // namespace

void set_option(GaussianMixtureOptions& options, std::string_view key, std::string_view value) {
  GaussianMixtureOptions o = options;  // `options` stays valid when `value` is not
  if (key == "n_components")
    o.n_components = parse_int_option(key, value);
  else if (key == "covariance_type")
    o.covariance_type = std::string(value);
  else if (key == "tol")
    o.tol = parse_double_option(key, value);
  else if (key == "reg_covar")
    o.reg_covar = parse_double_option(key, value);
  else if (key == "max_iter")
    o.max_iter = parse_int_option(key, value);
  else if (key == "n_init")
    o.n_init = parse_int_option(key, value);
  else if (key == "init_params")
    o.init_params = std::string(value);
  else if (key == "seed")
    o.seed = parse_uint64_option(key, value);
  else
    throw_unknown_option(kMixture, key,
                         {"n_components", "covariance_type", "tol", "reg_covar", "max_iter",
                          "n_init", "init_params", "seed"});
  validate(o);
  options = std::move(o);
}

GaussianMixture::GaussianMixture(GaussianMixtureOptions options) : options_(std::move(options)) {
  validate(options_);
}

void GaussianMixture::factor() {
  const std::size_t k = weights_.size(), d = features_;
  const std::size_t size = covariance_size(options_.covariance_type, d);
  cholesky_.assign(k * size, 0.0);
  for (std::size_t c = 0; c < k; ++c) {
    const double* s = covariances_.data() + c * size;
    double* l = cholesky_.data() + c * size;
    bool ok = true;
    if (options_.covariance_type != "full") {
      for (std::size_t j = 0; j < size; ++j) {
        ok = ok && s[j] > 0;
        l[j] = std::sqrt(s[j]);
      }
    } else {
      for (std::size_t j = 0; j < d && ok; ++j) {
        for (std::size_t i = j; i < d; ++i) {
          double v = s[i * d + j];
          for (std::size_t q = 0; q < j; ++q) v -= l[i * d + q] * l[j * d + q];
          if (i == j) {
            ok = v > 0;
            l[j * d + j] = ok ? std::sqrt(v) : 0.0;
          } else {
            l[i * d + j] = v / l[j * d + j];
          }
        }
      }
    }
    if (!ok)
      throw DataError(cat(kMixture, ": the covariance of component ", c,
                          " is not positive definite (too few distinct rows in it); use fewer "
                          "components or a larger reg_covar (now ",
                          options_.reg_covar, ")"));
  }
}

std::vector<double> GaussianMixture::log_weighted_densities(const LocalData& data) const {
  const std::size_t k = weights_.size(), d = features_;
  const std::size_t size = covariance_size(options_.covariance_type, d);
  const bool full = options_.covariance_type == "full";
  const bool diag = options_.covariance_type == "diag";
  const double log_2pi = std::log(2 * std::numbers::pi);
  std::vector<double> log_det(k, 0.0);  // log |Sigma_k| = 2 sum log diag(L)
  for (std::size_t c = 0; c < k; ++c) {
    const double* l = cholesky_.data() + c * size;
    for (std::size_t j = 0; j < d; ++j)
      log_det[c] += 2 * std::log(full ? l[j * d + j] : diag ? l[j] : l[0]);
  }
  std::vector<double> out(data.rows * k), z(d);
  for (std::size_t i = 0; i < data.rows; ++i) {
    const double* x = data.row(i);
    for (std::size_t c = 0; c < k; ++c) {
      const double* mu = means_.data() + c * d;
      const double* l = cholesky_.data() + c * size;
      double maha = 0;  // ||L^-1 (x - mu)||^2, by forward substitution for a full L
      for (std::size_t j = 0; j < d; ++j) {
        double v = x[j] - mu[j];
        if (full) {
          for (std::size_t q = 0; q < j; ++q) v -= l[j * d + q] * z[q];
          v /= l[j * d + j];
        } else {
          v /= diag ? l[j] : l[0];
        }
        z[j] = v;
        maha += v * v;
      }
      out[i * k + c] =
          std::log(weights_[c]) - 0.5 * (static_cast<double>(d) * log_2pi + log_det[c] + maha);
    }
  }
  return out;
}

double GaussianMixture::m_step(const LocalData& data, comm::Communicator& comm,
                               const std::vector<double>& resp, double log_likelihoods) {
  const std::size_t k = static_cast<std::size_t>(options_.n_components), d = data.features;
  // Pass 1: [N_k | sum r x (k x d) | sum of log-likelihoods].
  std::vector<double> first(k + k * d + 1, 0.0);
  for (std::size_t i = 0; i < data.rows; ++i) {
    const double* x = data.row(i);
    for (std::size_t c = 0; c < k; ++c) {
      const double r = resp[i * k + c];
      if (r == 0) continue;
      first[c] += r;
      for (std::size_t j = 0; j < d; ++j) first[k + c * d + j] += r * x[j];
    }
  }
  first.back() = log_likelihoods;
  allreduce_sum(comm, first);
  const double n = static_cast<double>(data.global_rows);
  const double eps = std::numeric_limits<double>::epsilon();
  std::vector<double> nk(k);
  double total = 0;
  means_.resize(k * d);
  for (std::size_t c = 0; c < k; ++c) {
    nk[c] = first[c] + 10 * eps;  // keeps an empty component's division finite
    total += nk[c];
    for (std::size_t j = 0; j < d; ++j) means_[c * d + j] = first[k + c * d + j] / nk[c];
  }
  weights_.resize(k);
  for (std::size_t c = 0; c < k; ++c) weights_[c] = nk[c] / total;

  // Pass 2: second moments around the new means.
  const bool full = options_.covariance_type == "full";
  const std::size_t per = full ? d * d : d;
  std::vector<double> second(k * per, 0.0), dx(d);
  for (std::size_t i = 0; i < data.rows; ++i) {
    const double* x = data.row(i);
    for (std::size_t c = 0; c < k; ++c) {
      const double r = resp[i * k + c];
      if (r == 0) continue;
      for (std::size_t j = 0; j < d; ++j) dx[j] = x[j] - means_[c * d + j];
      double* s = second.data() + c * per;
      if (full) {
        for (std::size_t a = 0; a < d; ++a)
          for (std::size_t b = 0; b <= a; ++b) s[a * d + b] += r * dx[a] * dx[b];
      } else {
        for (std::size_t j = 0; j < d; ++j) s[j] += r * dx[j] * dx[j];
      }
    }
  }
  allreduce_sum(comm, second);
  const std::size_t size = covariance_size(options_.covariance_type, d);
  covariances_.assign(k * size, 0.0);
  for (std::size_t c = 0; c < k; ++c) {
    const double* s = second.data() + c * per;
    double* out = covariances_.data() + c * size;
    if (full) {
      for (std::size_t a = 0; a < d; ++a)
        for (std::size_t b = 0; b <= a; ++b)
          out[a * d + b] = out[b * d + a] =
              s[a * d + b] / nk[c] + (a == b ? options_.reg_covar : 0);
    } else if (options_.covariance_type == "diag") {
      for (std::size_t j = 0; j < d; ++j) out[j] = s[j] / nk[c] + options_.reg_covar;
    } else {
      double mean = 0;
      for (std::size_t j = 0; j < d; ++j) mean += s[j] / nk[c] + options_.reg_covar;
      out[0] = mean / static_cast<double>(d);
    }
  }
  features_ = d;
  factor();
  return first.back() / n;
}

void GaussianMixture::fit(const LocalData& data, comm::Communicator& comm) {
  validate(options_);
  std::string error = shape_problem(data, kMixture);
  if (error.empty()) error = dense_problem(data, kMixture);
  for (std::size_t v = 0; error.empty() && v < data.x.size(); ++v)
    if (!std::isfinite(data.x[v]))
      error = cat(kMixture, ": row ", v / data.features,
                  " of this rank has a value that is not "
                  "finite in feature ",
                  v % data.features);
  throw_if_any_rank_failed(comm, error);
  check_shards_agree(comm, data, kMixture);
  if (data.features == 0) throw DataError(cat(kMixture, ": the data has no features"));
  if (static_cast<std::size_t>(options_.n_components) > data.global_rows)
    throw ConfigError(cat(kMixture, ": n_components = ", options_.n_components,
                          " is more than the ", data.global_rows, " rows of the data"));
  const auto k = static_cast<std::size_t>(options_.n_components);
  GaussianMixture best = *this;
  for (int run = 0; run < options_.n_init; ++run) {
    GaussianMixture m = *this;
    const auto seed = data::derive_seed(options_.seed, kRunStream, static_cast<std::uint64_t>(run));
    m.m_step(data, comm, initial_responsibilities(data, comm, options_, seed), 0);
    double lower = -std::numeric_limits<double>::infinity();
    m.converged_ = false;
    for (m.n_iter_ = 1; m.n_iter_ <= options_.max_iter; ++m.n_iter_) {
      std::vector<double> resp = m.log_weighted_densities(data);
      double local = 0;
      for (std::size_t i = 0; i < data.rows; ++i) {
        double* row = resp.data() + i * k;
        const double lse = log_sum_exp(row, k);
        local += lse;
        for (std::size_t c = 0; c < k; ++c) row[c] = std::exp(row[c] - lse);
      }
      const double previous = lower;
      lower = m.m_step(data, comm, resp, local);
      if (std::abs(lower - previous) < options_.tol) {
        m.converged_ = true;
        break;
      }
    }
    m.n_iter_ = std::min(m.n_iter_, options_.max_iter);
    m.lower_bound_ = lower;
    if (run == 0 || m.lower_bound_ > best.lower_bound_) best = std::move(m);
  }
  *this = std::move(best);
}

void GaussianMixture::check_fitted(std::string_view what) const {
  if (weights_.empty()) throw DataError(cat(kMixture, ": ", what, " before fit"));
}

std::vector<double> GaussianMixture::predict_proba(const LocalData& data) const {
  check_fitted("predict");
  check_feature_count(data, features_, kMixture);
  if (std::string dense = dense_problem(data, kMixture); !dense.empty()) throw DataError(dense);
  auto p = log_weighted_densities(data);
  normalize_log_proba(p, weights_.size());
  return p;
}

std::vector<std::int64_t> GaussianMixture::predict(const LocalData& data) const {
  const auto p = predict_proba(data);
  const std::size_t k = weights_.size();
  std::vector<std::int64_t> labels(data.rows);
  for (std::size_t i = 0; i < data.rows; ++i) labels[i] = argmax(p.data() + i * k, k);
  return labels;
}

double GaussianMixture::score(const LocalData& data, comm::Communicator& comm) const {
  check_fitted("score");
  check_feature_count(data, features_, kMixture);
  const auto logp = log_weighted_densities(data);
  std::vector<double> sums = {0, static_cast<double>(data.rows)};
  for (std::size_t i = 0; i < data.rows; ++i)
    sums[0] += log_sum_exp(logp.data() + i * weights_.size(), weights_.size());
  allreduce_sum(comm, sums);
  if (sums[1] == 0) throw DataError(cat(kMixture, ": score on no rows"));
  return sums[0] / sums[1];
}

nlohmann::json GaussianMixture::to_json() const {
  check_fitted("to_json");
  return {{"estimator", kMixture},       {"version", 1},        {"options", options_},
          {"features", features_},       {"weights", weights_}, {"means", means_},
          {"covariances", covariances_}, {"n_iter", n_iter_},   {"converged", converged_},
          {"lower_bound", lower_bound_}};
}

GaussianMixture GaussianMixture::from_json(const nlohmann::json& j) {
  try {
    if (model_field(j, "estimator", kMixture) != kMixture ||
        model_field(j, "version", kMixture) != 1)
      throw DataError(cat("not a version 1 ", kMixture, " model"));
    GaussianMixture m(model_options<GaussianMixtureOptions>(j, kMixture));
    m.features_ = model_integer<std::size_t>(j, "features", kMixture);
    m.weights_ = model_field(j, "weights", kMixture).get<std::vector<double>>();
    m.means_ = model_field(j, "means", kMixture).get<std::vector<double>>();
    m.covariances_ = model_field(j, "covariances", kMixture).get<std::vector<double>>();
    m.n_iter_ = model_integer<int>(j, "n_iter", kMixture);
    m.converged_ = model_field(j, "converged", kMixture).get<bool>();
    m.lower_bound_ = model_field(j, "lower_bound", kMixture).get<double>();
    const std::size_t k = static_cast<std::size_t>(m.options_.n_components), d = m.features_;
    if (m.weights_.size() != k || m.means_.size() != k * d ||
        m.covariances_.size() != k * covariance_size(m.options_.covariance_type, d))
      throw DataError(cat("fields do not match n_components ", k, " and features ", d));
    m.factor();
    return m;
  } catch (const nlohmann::json::exception& e) {
    throw DataError(cat(kMixture, " model: ", e.what()));
  } catch (const DataError& e) {
    throw DataError(cat(kMixture, " model: ", e.what()));
  }
}

}  // namespace distml::ml
