#include "distml/ml/logistic_regression.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <span>

#include "distml/core/error.h"
#include "distml/ml/estimator_support.h"
#include "distml/ml/lbfgs.h"
#include "distml/ml/minibatch_sgd.h"

namespace distml::ml {
namespace {

constexpr std::string_view kLogreg = "logistic_regression";

void validate(const LogisticRegressionOptions& o) {
  require_option(o.C > 0 && std::isfinite(o.C), kLogreg, "C", "a positive number");
  require_option(o.max_iter >= 1, kLogreg, "max_iter", "at least 1");
  require_option(o.tol >= 0, kLogreg, "tol", "non-negative");
  require_option(o.penalty == "l2" || o.penalty == "l1", kLogreg, "penalty", "\"l2\" or \"l1\"");
  require_option(o.solver == "lbfgs" || o.solver == "sgd", kLogreg, "solver",
                 "\"lbfgs\" or \"sgd\"");
  if (o.penalty == "l1" && o.solver != "lbfgs")
    throw ConfigError(
        cat(kLogreg, ": penalty \"l1\" needs solver \"lbfgs\" (OWL-QN), not \"", o.solver, "\""));
  require_option(o.learning_rate > 0, kLogreg, "learning_rate", "positive");
  require_option(o.epochs >= 1, kLogreg, "epochs", "at least 1");
  require_option(o.batch_size >= 1, kLogreg, "batch_size", "at least 1");
}

// Where the parameters of output m live in the flat vector the solvers see.
struct Layout {
  std::size_t features, outputs, stride;
  bool intercept;
  Layout(std::size_t f, std::int64_t classes, bool fit_intercept)
      : features(f),
        outputs(classes == 2 ? 1 : static_cast<std::size_t>(classes)),
        stride(f + (fit_intercept ? 1 : 0)),
        intercept(fit_intercept) {}
  std::size_t size() const { return outputs * stride; }
  bool penalised(std::size_t p) const { return !intercept || p % stride != features; }
};

// Loss of one row from its scores z[0..outputs), which become the residuals dloss/dz.
double loss_and_residuals(double* z, std::int64_t y, std::size_t outputs) {
  if (outputs == 1) {
    const double loss = logistic_loss(y == 1 ? z[0] : -z[0]);
    z[0] = sigmoid(z[0]) - (y == 1 ? 1.0 : 0.0);
    return loss;
  }
  const double lse = log_sum_exp(z, outputs);
  const double loss = lse - z[y];
  for (std::size_t m = 0; m < outputs; ++m)
    z[m] = std::exp(z[m] - lse) - (static_cast<std::int64_t>(m) == y ? 1.0 : 0.0);
  return loss;
}

// Rows per GEMM block: their scores and residuals stay in cache between the two products.
constexpr std::size_t kRowBlock = 256;

// add_loss_gradient for sparse rows: a row's scores and gradient touch its stored entries only.
double add_sparse_loss_gradient(const LocalData& d, const Layout& l, const std::vector<double>& w,
                                double* grad, std::span<const std::size_t> rows, bool all) {
  const std::size_t n = all ? d.rows : rows.size(), k = l.outputs, f = l.features;
  std::vector<double> z(k);
  double loss = 0;
  for (std::size_t r = 0; r < n; ++r) {
    const std::size_t i = all ? r : rows[r];
    for (std::size_t m = 0; m < k; ++m)
      z[m] = (l.intercept ? w[m * l.stride + f] : 0.0) + d.dot(i, w.data() + m * l.stride);
    loss += loss_and_residuals(z.data(), d.y[i], k);
    for (std::size_t m = 0; m < k; ++m) {
      d.add_scaled(i, z[m], grad + m * l.stride);
      if (l.intercept) grad[m * l.stride + f] += z[m];
    }
  }
  return loss;
}

// Adds the summed loss gradient of local rows (all of them when `all`, else `rows`) to
// grad[0..layout.size()) and returns their summed loss. For dense rows, scores Z = X W^T and
// the gradient R^T X are BLAS products over blocks of consecutive rows.
double add_loss_gradient(const LocalData& d, const Layout& l, const std::vector<double>& w,
                         double* grad, std::span<const std::size_t> rows, bool all) {
  if (d.sparse) return add_sparse_loss_gradient(d, l, w, grad, rows, all);
  use_one_blas_thread();
  const std::size_t n = all ? d.rows : rows.size(), k = l.outputs, f = l.features;
  std::vector<double> gathered, z(kRowBlock * k);
  double loss = 0;
  for (std::size_t b0 = 0; b0 < n; b0 += kRowBlock) {
    const std::size_t b = std::min(kRowBlock, n - b0);
    const double* x = nullptr;
    if (all) {
      x = d.row(b0);
    } else {  // a mini-batch: copy its rows next to each other
      gathered.resize(b * f);
      for (std::size_t r = 0; r < b; ++r)
        std::copy(d.row(rows[b0 + r]), d.row(rows[b0 + r]) + f, gathered.data() + r * f);
      x = gathered.data();
    }
    for (std::size_t r = 0; r < b; ++r)
      for (std::size_t m = 0; m < k; ++m) z[r * k + m] = l.intercept ? w[m * l.stride + f] : 0.0;
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(b), static_cast<int>(k),
                static_cast<int>(f), 1.0, x, static_cast<int>(f), w.data(),
                static_cast<int>(l.stride), 1.0, z.data(), static_cast<int>(k));
    for (std::size_t r = 0; r < b; ++r)
      loss += loss_and_residuals(z.data() + r * k, d.y[all ? b0 + r : rows[b0 + r]], k);
    cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, static_cast<int>(k), static_cast<int>(f),
                static_cast<int>(b), 1.0, z.data(), static_cast<int>(k), x, static_cast<int>(f),
                1.0, grad, static_cast<int>(l.stride));
    if (l.intercept)
      for (std::size_t r = 0; r < b; ++r)
        for (std::size_t m = 0; m < k; ++m) grad[m * l.stride + f] += z[r * k + m];
  }
  return loss;
}

// The scaled objective without an L1 term (mean loss, plus the L2 term with penalty "l2") and
// its gradient.
double smooth_objective(const LocalData& data, const LogisticRegressionOptions& options,
                        comm::Communicator& comm, const std::vector<double>& w,
                        std::vector<double>& grad) {
  const Layout l(data.features, data.num_classes, options.fit_intercept);
  DML_CHECK_EQ(w.size(), l.size(), "logistic regression parameters");
  std::vector<double> buf(l.size() + 1, 0.0);  // gradient, then loss
  buf[l.size()] = add_loss_gradient(data, l, w, buf.data(), {}, true);
  allreduce_sum(comm, buf);
  const double n = static_cast<double>(data.global_rows);
  const double l2 = options.penalty == "l2" ? 1 / (options.C * n) : 0.0;
  double f = buf[l.size()] / n;
  grad.resize(l.size());
  for (std::size_t p = 0; p < l.size(); ++p) {
    grad[p] = buf[p] / n;
    if (l2 > 0 && l.penalised(p)) {
      f += 0.5 * l2 * w[p] * w[p];
      grad[p] += l2 * w[p];
    }
  }
  return f;
}

// The L1 weights of the scaled objective with penalty "l1": 1 / (C N) on coefficients, 0 on
// intercepts.
std::vector<double> l1_weights(const LocalData& data, const LogisticRegressionOptions& options) {
  const Layout l(data.features, data.num_classes, options.fit_intercept);
  std::vector<double> l1(l.size(), 0.0);
  for (std::size_t p = 0; p < l.size(); ++p)
    if (l.penalised(p)) l1[p] = 1 / (options.C * static_cast<double>(data.global_rows));
  return l1;
}

}  // namespace

void set_option(LogisticRegressionOptions& o, std::string_view key, std::string_view value) {
  if (key == "C")
    o.C = parse_double_option(key, value);
  else if (key == "max_iter")
    o.max_iter = parse_int_option(key, value);
  else if (key == "tol")
    o.tol = parse_double_option(key, value);
  else if (key == "fit_intercept")
    o.fit_intercept = parse_bool_option(key, value);
  else if (key == "penalty")
    o.penalty = std::string(value);
  else if (key == "solver")
    o.solver = std::string(value);
  else if (key == "learning_rate")
    o.learning_rate = parse_double_option(key, value);
  else if (key == "epochs")
    o.epochs = parse_int_option(key, value);
  else if (key == "batch_size")
    o.batch_size = parse_int_option(key, value);
  else if (key == "seed")
    o.seed = parse_uint64_option(key, value);
  else
    throw_unknown_option(kLogreg, key,
                         {"C", "max_iter", "tol", "fit_intercept", "penalty", "solver",
                          "learning_rate", "epochs", "batch_size", "seed"});
  validate(o);
}

LogisticRegression::LogisticRegression(LogisticRegressionOptions options)
    : options_(std::move(options)) {
  validate(options_);
}

double LogisticRegression::scaled_objective(const LocalData& data,
                                            const LogisticRegressionOptions& options,
                                            comm::Communicator& comm, const std::vector<double>& w,
                                            std::vector<double>& grad) {
  double f = smooth_objective(data, options, comm, w, grad);
  if (options.penalty == "l1") {
    const auto l1 = l1_weights(data, options);
    for (std::size_t p = 0; p < w.size(); ++p) f += l1[p] * std::abs(w[p]);
  }
  return f;
}

void LogisticRegression::fit(const LocalData& data, comm::Communicator& comm) {
  validate(options_);
  throw_if_any_rank_failed(comm, check_classification_shard(data, kLogreg));
  check_shards_agree(comm, data, kLogreg);
  const Layout l(data.features, data.num_classes, options_.fit_intercept);
  const double n = static_cast<double>(data.global_rows);
  std::vector<double> w(l.size(), 0.0);
  if (options_.solver == "lbfgs") {
    LbfgsOptions lo;
    lo.max_iter = options_.max_iter;
    lo.tol = options_.tol;
    const LbfgsObjective smooth = [&](const std::vector<double>& v, std::vector<double>& g) {
      return smooth_objective(data, options_, comm, v, g);
    };
    const auto r = options_.penalty == "l1"
                       ? minimize_owlqn(smooth, std::move(w), l1_weights(data, options_), lo)
                       : minimize_lbfgs(smooth, std::move(w), lo);
    w = r.w;
    fit_.objective = options_.C * n * r.objective;
    fit_.n_iter = r.iterations;
    fit_.converged = r.converged;
  } else {
    std::vector<double> l2(l.size(), 0.0);
    for (std::size_t p = 0; p < l.size(); ++p)
      if (l.penalised(p)) l2[p] = 1 / (options_.C * n);
    SgdOptions so{options_.learning_rate, options_.epochs,
                  static_cast<std::size_t>(options_.batch_size), options_.seed};
    auto r = minimize_sgd(
        [&](std::span<const std::size_t> rows, const std::vector<double>& v,
            std::vector<double>& g) {
          return add_loss_gradient(data, l, v, g.data(), rows, false);
        },
        data.rows, std::move(w), l2, so, comm);
    w = std::move(r.w);
    std::vector<double> g;
    fit_.objective = options_.C * n * scaled_objective(data, options_, comm, w, g);
    fit_.n_iter = r.epochs;
    fit_.converged = false;
  }
  fit_.num_classes = data.num_classes;
  fit_.features = data.features;
  fit_.class_names = data.class_names;
  fit_.coef.assign(l.outputs * l.features, 0.0);
  fit_.intercept.assign(l.outputs, 0.0);
  for (std::size_t m = 0; m < l.outputs; ++m) {
    for (std::size_t j = 0; j < l.features; ++j)
      fit_.coef[m * l.features + j] = w[m * l.stride + j];
    if (l.intercept) fit_.intercept[m] = w[m * l.stride + l.features];
  }
}

void LogisticRegression::check_fitted(std::string_view what) const {
  if (fit_.num_classes == 0) throw DataError(cat(kLogreg, ": ", what, " before fit"));
}

std::vector<double> LogisticRegression::decision_function(const LocalData& data) const {
  check_fitted("decision_function");
  return fit_.decision(data, kLogreg);
}

std::vector<double> LogisticRegression::predict_proba(const LocalData& data) const {
  auto z = decision_function(data);
  if (outputs() > 1) {
    normalize_log_proba(z, outputs());
    return z;
  }
  std::vector<double> p(2 * data.rows);
  for (std::size_t i = 0; i < data.rows; ++i) {
    p[2 * i + 1] = sigmoid(z[i]);
    p[2 * i] = 1 - p[2 * i + 1];
  }
  return p;
}

std::vector<std::int64_t> LogisticRegression::predict(const LocalData& data) const {
  check_fitted("predict");
  return fit_.predict(data, kLogreg);
}

double LogisticRegression::score(const LocalData& data, comm::Communicator& comm) const {
  return global_accuracy(comm, data, predict(data));
}

nlohmann::json LogisticRegression::to_json() const {
  check_fitted("to_json");
  nlohmann::json j = {{"estimator", kLogreg}, {"version", 1}, {"options", options_}};
  fit_.write(j);
  return j;
}

LogisticRegression LogisticRegression::from_json(const nlohmann::json& j) {
  try {
    if (model_field(j, "estimator", kLogreg) != kLogreg || model_field(j, "version", kLogreg) != 1)
      throw DataError(cat("not a version 1 ", kLogreg, " model"));
    const auto o = model_options<LogisticRegressionOptions>(j, kLogreg);  // no "penalty" (older files): l2
    LogisticRegression m(o);
    m.fit_ = LinearFit::read(j, kLogreg);
    return m;
  } catch (const nlohmann::json::exception& e) {
    throw DataError(cat(kLogreg, " model: ", e.what()));
  } catch (const ConfigError& e) {
    throw DataError(cat(kLogreg, " model: ", e.what()));
  }
}

}  // namespace distml::ml
