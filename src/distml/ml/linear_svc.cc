#include "distml/ml/linear_svc.h"

#include <algorithm>
#include <cmath>
#include <span>

#include "distml/core/error.h"
#include "distml/ml/estimator_support.h"
#include "distml/ml/lbfgs.h"
#include "distml/ml/minibatch_sgd.h"

namespace distml::ml {
namespace {

constexpr std::string_view kSvc = "linear_svc";

void validate(const LinearSVCOptions& o) {
  require_option(o.C > 0 && std::isfinite(o.C), kSvc, "C", "a positive number");
  require_option(o.loss == "squared_hinge" || o.loss == "hinge", kSvc, "loss",
                 "\"squared_hinge\" or \"hinge\"");
  require_option(o.max_iter >= 1, kSvc, "max_iter", "at least 1");
  require_option(o.tol >= 0, kSvc, "tol", "non-negative");
  require_option(o.intercept_scaling > 0, kSvc, "intercept_scaling", "positive");
  require_option(o.solver == "auto" || o.solver == "lbfgs" || o.solver == "sgd", kSvc, "solver",
                 "\"auto\", \"lbfgs\" or \"sgd\"");
  require_option(!(o.solver == "lbfgs" && o.loss == "hinge"), kSvc, "solver",
                 "\"sgd\" or \"auto\" for loss \"hinge\" (hinge is not differentiable)");
  require_option(o.learning_rate > 0, kSvc, "learning_rate", "positive");
  require_option(o.epochs >= 1, kSvc, "epochs", "at least 1");
  require_option(o.batch_size >= 1, kSvc, "batch_size", "at least 1");
}

bool uses_lbfgs(const LinearSVCOptions& o) {
  return o.solver == "lbfgs" || (o.solver == "auto" && o.loss == "squared_hinge");
}

std::size_t outputs_for(std::int64_t classes) {
  return classes == 2 ? 1 : static_cast<std::size_t>(classes);
}

// The class that is positive in problem m.
std::int64_t positive_class(std::size_t outputs, std::size_t m) {
  return outputs == 1 ? 1 : static_cast<std::int64_t>(m);
}

// One one-vs-rest problem: adds the summed (sub)gradient of the loss over local rows (all of
// them when `all`) to grad[0..stride) and returns the summed loss.
double add_loss_gradient(const LocalData& d, const LinearSVCOptions& o, std::int64_t positive,
                         const double* w, double* grad, std::span<const std::size_t> rows,
                         bool all) {
  const std::size_t f = d.features;
  const bool squared = o.loss == "squared_hinge";
  const double bias = o.fit_intercept ? o.intercept_scaling : 0.0;
  const double w_bias = o.fit_intercept ? w[f] : 0.0;
  const std::size_t n = all ? d.rows : rows.size();
  double loss = 0;
  for (std::size_t r = 0; r < n; ++r) {
    const std::size_t i = all ? r : rows[r];
    const double z = w_bias * bias + d.dot(i, w);
    const double s = d.y[i] == positive ? 1.0 : -1.0;
    const double slack = 1 - s * z;
    if (slack <= 0) continue;
    loss += squared ? slack * slack : slack;
    const double dz = squared ? -2 * s * slack : -s;
    d.add_scaled(i, dz, grad);
    if (o.fit_intercept) grad[f] += dz * bias;
  }
  return loss;
}

// The scaled objective of problem m alone, with one all-reduce.
double problem_objective(const LocalData& d, const LinearSVCOptions& o, comm::Communicator& comm,
                         std::int64_t positive, const double* w, double* grad, std::size_t stride) {
  std::vector<double> buf(stride + 1, 0.0);
  buf[stride] = add_loss_gradient(d, o, positive, w, buf.data(), {}, true);
  allreduce_sum(comm, buf);
  const double n = static_cast<double>(d.global_rows);
  const double penalty = 1 / (o.C * n);
  double f = buf[stride] / n;
  for (std::size_t p = 0; p < stride; ++p) {
    f += 0.5 * penalty * w[p] * w[p];
    grad[p] = buf[p] / n + penalty * w[p];
  }
  return f;
}

}  // namespace

void set_option(LinearSVCOptions& o, std::string_view key, std::string_view value) {
  if (key == "C")
    o.C = parse_double_option(key, value);
  else if (key == "loss")
    o.loss = std::string(value);
  else if (key == "max_iter")
    o.max_iter = parse_int_option(key, value);
  else if (key == "tol")
    o.tol = parse_double_option(key, value);
  else if (key == "fit_intercept")
    o.fit_intercept = parse_bool_option(key, value);
  else if (key == "intercept_scaling")
    o.intercept_scaling = parse_double_option(key, value);
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
    throw_unknown_option(kSvc, key,
                         {"C", "loss", "max_iter", "tol", "fit_intercept", "intercept_scaling",
                          "solver", "learning_rate", "epochs", "batch_size", "seed"});
  validate(o);
}

LinearSVC::LinearSVC(LinearSVCOptions options) : options_(std::move(options)) {
  validate(options_);
}

double LinearSVC::scaled_objective(const LocalData& data, const LinearSVCOptions& options,
                                   comm::Communicator& comm, const std::vector<double>& w,
                                   std::vector<double>& grad) {
  const std::size_t outputs = outputs_for(data.num_classes);
  const std::size_t stride = data.features + (options.fit_intercept ? 1 : 0);
  DML_CHECK_EQ(w.size(), outputs * stride, "linear svc parameters");
  grad.resize(w.size());
  double f = 0;
  for (std::size_t m = 0; m < outputs; ++m)
    f += problem_objective(data, options, comm, positive_class(outputs, m), w.data() + m * stride,
                           grad.data() + m * stride, stride);
  return f;
}

void LinearSVC::fit(const LocalData& data, comm::Communicator& comm) {
  validate(options_);
  throw_if_any_rank_failed(comm, check_classification_shard(data, kSvc));
  check_shards_agree(comm, data, kSvc);
  const std::size_t outputs = outputs_for(data.num_classes);
  const std::size_t f = data.features;
  const std::size_t stride = f + (options_.fit_intercept ? 1 : 0);
  const double n = static_cast<double>(data.global_rows);
  std::vector<double> w(outputs * stride, 0.0);
  if (uses_lbfgs(options_)) {
    LbfgsOptions lo;
    lo.max_iter = options_.max_iter;
    lo.tol = options_.tol;
    fit_.n_iter = 0;
    fit_.converged = true;
    fit_.objective = 0;
    for (std::size_t m = 0; m < outputs; ++m) {
      const auto positive = positive_class(outputs, m);
      const auto r = minimize_lbfgs(
          [&](const std::vector<double>& v, std::vector<double>& g) {
            return problem_objective(data, options_, comm, positive, v.data(), g.data(), stride);
          },
          std::vector<double>(stride, 0.0), lo);
      std::copy(r.w.begin(), r.w.end(), w.begin() + m * stride);
      fit_.objective += options_.C * n * r.objective;
      fit_.n_iter = std::max(fit_.n_iter, r.iterations);
      fit_.converged = fit_.converged && r.converged;
    }
  } else {
    // The problems are independent, so one SGD run over all of them is each run alone.
    const std::vector<double> l2(w.size(), 1 / (options_.C * n));
    SgdOptions so{options_.learning_rate, options_.epochs,
                  static_cast<std::size_t>(options_.batch_size), options_.seed};
    auto r = minimize_sgd(
        [&](std::span<const std::size_t> rows, const std::vector<double>& v,
            std::vector<double>& g) {
          double loss = 0;
          for (std::size_t m = 0; m < outputs; ++m)
            loss += add_loss_gradient(data, options_, positive_class(outputs, m),
                                      v.data() + m * stride, g.data() + m * stride, rows, false);
          return loss;
        },
        data.rows, std::move(w), l2, so, comm);
    w = std::move(r.w);
    std::vector<double> g;
    fit_.objective = options_.C * n * scaled_objective(data, options_, comm, w, g);
    fit_.n_iter = r.epochs;
    fit_.converged = false;
  }
  fit_.num_classes = data.num_classes;
  fit_.features = f;
  fit_.class_names = data.class_names;
  fit_.coef.assign(outputs * f, 0.0);
  fit_.intercept.assign(outputs, 0.0);
  for (std::size_t m = 0; m < outputs; ++m) {
    std::copy_n(w.begin() + m * stride, f, fit_.coef.begin() + m * f);
    if (options_.fit_intercept) fit_.intercept[m] = options_.intercept_scaling * w[m * stride + f];
  }
}

void LinearSVC::check_fitted(std::string_view what) const {
  if (fit_.num_classes == 0) throw DataError(cat(kSvc, ": ", what, " before fit"));
}

std::vector<double> LinearSVC::decision_function(const LocalData& data) const {
  check_fitted("decision_function");
  return fit_.decision(data, kSvc);
}

std::vector<std::int64_t> LinearSVC::predict(const LocalData& data) const {
  check_fitted("predict");
  return fit_.predict(data, kSvc);
}

double LinearSVC::score(const LocalData& data, comm::Communicator& comm) const {
  return global_accuracy(comm, data, predict(data));
}

nlohmann::json LinearSVC::to_json() const {
  check_fitted("to_json");
  nlohmann::json j = {{"estimator", kSvc}, {"version", 1}, {"options", options_}};
  fit_.write(j);
  return j;
}

LinearSVC LinearSVC::from_json(const nlohmann::json& j) {
  try {
    if (model_field(j, "estimator", kSvc) != kSvc || model_field(j, "version", kSvc) != 1)
      throw DataError(cat("not a version 1 ", kSvc, " model"));
    const auto o = model_options<LinearSVCOptions>(j, kSvc);
    LinearSVC m(o);
    m.fit_ = LinearFit::read(j, kSvc);
    return m;
  } catch (const nlohmann::json::exception& e) {
    throw DataError(cat(kSvc, " model: ", e.what()));
  } catch (const ConfigError& e) {
    throw DataError(cat(kSvc, " model: ", e.what()));
  }
}

}  // namespace distml::ml
