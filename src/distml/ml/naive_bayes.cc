#include "distml/ml/naive_bayes.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>

#include "distml/core/error.h"
#include "distml/ml/estimator_support.h"

namespace distml::ml {
namespace {

constexpr std::string_view kGaussian = "gaussian_nb";
constexpr std::string_view kMultinomial = "multinomial_nb";

void validate(const GaussianNBOptions& o) {
  require_option(o.var_smoothing >= 0, kGaussian, "var_smoothing", "non-negative");
}

void validate(const MultinomialNBOptions& o) {
  // 0 would leave log(0) for a feature a class never shows, and NaN probabilities.
  require_option(o.alpha > 0 && std::isfinite(o.alpha), kMultinomial, "alpha", "positive");
}

std::vector<std::int64_t> argmax_rows(const std::vector<double>& v, std::size_t k) {
  std::vector<std::int64_t> out(v.size() / k);
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = argmax(v.data() + i * k, k);
  return out;
}

void check_fitted(std::int64_t classes, std::string_view who, std::string_view what) {
  if (classes == 0) throw DataError(cat(who, ": ", what, " before fit"));
}

template <class Model>
Model parse_or_throw(std::string_view who, const nlohmann::json& j,
                     Model (*parse)(const nlohmann::json&)) {
  try {
    if (model_field(j, "estimator", who) != who || model_field(j, "version", who) != 1)
      throw DataError(cat("not a version 1 ", who, " model"));
    return parse(j);
  } catch (const nlohmann::json::exception& e) {
    throw DataError(cat(who, " model: ", e.what()));
  } catch (const ConfigError& e) {
    throw DataError(cat(who, " model: ", e.what()));
  }
}

void check_sizes(std::string_view who, std::int64_t classes, std::size_t features,
                 std::initializer_list<std::pair<const std::vector<double>*, bool>> fields) {
  const auto k = static_cast<std::size_t>(std::max<std::int64_t>(classes, 0));
  bool ok = classes >= 2;
  for (const auto& [v, per_feature] : fields)
    ok = ok && v->size() == k * (per_feature ? features : 1);
  if (!ok)
    throw DataError(
        cat(who, " model: fields do not match num_classes ", classes, " and features ", features));
}

}  // namespace

// ---- GaussianNB ----

void set_option(GaussianNBOptions& o, std::string_view key, std::string_view value) {
  if (key == "var_smoothing")
    o.var_smoothing = parse_double_option(key, value);
  else
    throw_unknown_option(kGaussian, key, {"var_smoothing"});
  validate(o);
}

GaussianNB::GaussianNB(GaussianNBOptions options) : options_(options) { validate(options_); }

void GaussianNB::fit(const LocalData& data, comm::Communicator& comm) {
  validate(options_);
  std::string error = check_classification_shard(data, kGaussian);
  if (error.empty()) error = dense_problem(data, kGaussian);
  throw_if_any_rank_failed(comm, error);
  check_shards_agree(comm, data, kGaussian);
  const auto k = static_cast<std::size_t>(data.num_classes);
  const std::size_t f = data.features;
  const double n = static_cast<double>(data.global_rows);

  // Pass 1: per-class counts and sums, and sums over all rows: [counts | K x F | F].
  std::vector<double> first(k + k * f + f, 0.0);
  for (std::size_t i = 0; i < data.rows; ++i) {
    const auto c = static_cast<std::size_t>(data.y[i]);
    const double* x = data.row(i);
    first[c] += 1;
    for (std::size_t j = 0; j < f; ++j) {
      first[k + c * f + j] += x[j];
      first[k + k * f + j] += x[j];
    }
  }
  allreduce_sum(comm, first);
  class_count_.assign(first.begin(), first.begin() + k);
  theta_.assign(k * f, 0.0);
  for (std::size_t c = 0; c < k; ++c)
    for (std::size_t j = 0; j < f; ++j)
      if (class_count_[c] > 0) theta_[c * f + j] = first[k + c * f + j] / class_count_[c];
  std::vector<double> mean(f);
  for (std::size_t j = 0; j < f; ++j) mean[j] = first[k + k * f + j] / n;

  // Pass 2: squared deviations from the class means and from the overall mean: [K x F | F].
  std::vector<double> second(k * f + f, 0.0);
  for (std::size_t i = 0; i < data.rows; ++i) {
    const auto c = static_cast<std::size_t>(data.y[i]);
    const double* x = data.row(i);
    for (std::size_t j = 0; j < f; ++j) {
      const double dc = x[j] - theta_[c * f + j], dm = x[j] - mean[j];
      second[c * f + j] += dc * dc;
      second[k * f + j] += dm * dm;
    }
  }
  allreduce_sum(comm, second);
  double largest = 0;
  for (std::size_t j = 0; j < f; ++j) largest = std::max(largest, second[k * f + j] / n);
  epsilon_ = options_.var_smoothing * largest;
  var_.assign(k * f, epsilon_);
  for (std::size_t c = 0; c < k; ++c)
    for (std::size_t j = 0; j < f; ++j)
      if (class_count_[c] > 0) var_[c * f + j] += second[c * f + j] / class_count_[c];
  class_prior_.resize(k);
  for (std::size_t c = 0; c < k; ++c) class_prior_[c] = class_count_[c] / n;
  num_classes_ = data.num_classes;
  features_ = f;
  class_names_ = data.class_names;
}

std::vector<double> GaussianNB::joint_log_likelihood(const LocalData& data) const {
  check_fitted(num_classes_, kGaussian, "predict");
  check_feature_count(data, features_, kGaussian);
  if (std::string dense = dense_problem(data, kGaussian); !dense.empty()) throw DataError(dense);
  const auto k = static_cast<std::size_t>(num_classes_);
  const std::size_t f = features_;
  std::vector<double> base(k);  // log prior - 0.5 * sum_j log(2 pi var)
  for (std::size_t c = 0; c < k; ++c) {
    double s = 0;
    for (std::size_t j = 0; j < f; ++j) s += std::log(2 * std::numbers::pi * var_[c * f + j]);
    base[c] = std::log(class_prior_[c]) - 0.5 * s;
  }
  std::vector<double> jll(data.rows * k);
  for (std::size_t i = 0; i < data.rows; ++i) {
    const double* x = data.row(i);
    for (std::size_t c = 0; c < k; ++c) {
      double s = 0;
      for (std::size_t j = 0; j < f; ++j) {
        const double d = x[j] - theta_[c * f + j];
        s += d * d / var_[c * f + j];
      }
      jll[i * k + c] = base[c] - 0.5 * s;
    }
  }
  return jll;
}

std::vector<double> GaussianNB::predict_proba(const LocalData& data) const {
  auto p = joint_log_likelihood(data);
  normalize_log_proba(p, static_cast<std::size_t>(num_classes_));
  return p;
}

std::vector<std::int64_t> GaussianNB::predict(const LocalData& data) const {
  return argmax_rows(joint_log_likelihood(data), static_cast<std::size_t>(num_classes_));
}

double GaussianNB::score(const LocalData& data, comm::Communicator& comm) const {
  return global_accuracy(comm, data, predict(data));
}

nlohmann::json GaussianNB::to_json() const {
  check_fitted(num_classes_, kGaussian, "to_json");
  return {{"estimator", kGaussian},
          {"version", 1},
          {"options", {{"var_smoothing", options_.var_smoothing}}},
          {"num_classes", num_classes_},
          {"features", features_},
          {"class_count", class_count_},
          {"class_prior", class_prior_},
          {"theta", theta_},
          {"var", var_},
          {"epsilon", epsilon_},
          {"class_names", class_names_}};
}

GaussianNB GaussianNB::from_json(const nlohmann::json& j) {
  return parse_or_throw<GaussianNB>(kGaussian, j, [](const nlohmann::json& j) {
    GaussianNBOptions o;
    o.var_smoothing =
        model_field(model_field(j, "options", kGaussian), "var_smoothing", kGaussian).get<double>();
    GaussianNB m(o);
    m.num_classes_ = model_integer<std::int64_t>(j, "num_classes", kGaussian);
    m.features_ = model_integer<std::size_t>(j, "features", kGaussian);
    m.class_count_ = model_field(j, "class_count", kGaussian).get<std::vector<double>>();
    m.class_prior_ = model_field(j, "class_prior", kGaussian).get<std::vector<double>>();
    m.theta_ = model_field(j, "theta", kGaussian).get<std::vector<double>>();
    m.var_ = model_field(j, "var", kGaussian).get<std::vector<double>>();
    m.epsilon_ = model_field(j, "epsilon", kGaussian).get<double>();
    m.class_names_ = model_field(j, "class_names", kGaussian).get<std::vector<std::string>>();
    check_sizes(
        kGaussian, m.num_classes_, m.features_,
        {{&m.class_count_, false}, {&m.class_prior_, false}, {&m.theta_, true}, {&m.var_, true}});
    return m;
  });
}

// ---- MultinomialNB ----

void set_option(MultinomialNBOptions& o, std::string_view key, std::string_view value) {
  if (key == "alpha")
    o.alpha = parse_double_option(key, value);
  else if (key == "fit_prior")
    o.fit_prior = parse_bool_option(key, value);
  else
    throw_unknown_option(kMultinomial, key, {"alpha", "fit_prior"});
  validate(o);
}

MultinomialNB::MultinomialNB(MultinomialNBOptions options) : options_(options) {
  validate(options_);
}

void MultinomialNB::fit(const LocalData& data, comm::Communicator& comm) {
  validate(options_);
  std::string error = check_classification_shard(data, kMultinomial);
  for (std::size_t i = 0; error.empty() && i < data.rows; ++i)
    data.for_each_entry(i, [&](std::size_t j, double v) {
      if (error.empty() && !(v >= 0))
        error = cat(kMultinomial, ": features must be non-negative; row ", i, " of this rank has ",
                    v, " in feature ", j);
    });
  throw_if_any_rank_failed(comm, error);
  check_shards_agree(comm, data, kMultinomial);
  const auto k = static_cast<std::size_t>(data.num_classes);
  const std::size_t f = data.features;

  std::vector<double> stats(k + k * f, 0.0);  // [counts | K x F feature sums]
  for (std::size_t i = 0; i < data.rows; ++i) {
    const auto c = static_cast<std::size_t>(data.y[i]);
    stats[c] += 1;
    data.add_scaled(i, 1.0, stats.data() + k + c * f);
  }
  allreduce_sum(comm, stats);
  class_count_.assign(stats.begin(), stats.begin() + k);
  feature_count_.assign(stats.begin() + k, stats.end());
  feature_log_prob_.resize(k * f);
  class_log_prior_.resize(k);
  const double n = static_cast<double>(data.global_rows);
  for (std::size_t c = 0; c < k; ++c) {
    double total = 0;
    for (std::size_t j = 0; j < f; ++j) total += feature_count_[c * f + j] + options_.alpha;
    for (std::size_t j = 0; j < f; ++j)
      feature_log_prob_[c * f + j] =
          std::log(feature_count_[c * f + j] + options_.alpha) - std::log(total);
    class_log_prior_[c] =
        options_.fit_prior ? std::log(class_count_[c] / n) : -std::log(static_cast<double>(k));
  }
  num_classes_ = data.num_classes;
  features_ = f;
  class_names_ = data.class_names;
}

std::vector<double> MultinomialNB::joint_log_likelihood(const LocalData& data) const {
  check_fitted(num_classes_, kMultinomial, "predict");
  check_feature_count(data, features_, kMultinomial);
  const auto k = static_cast<std::size_t>(num_classes_);
  return linear_decision(data, feature_log_prob_, class_log_prior_, k);
}

std::vector<double> MultinomialNB::predict_proba(const LocalData& data) const {
  auto p = joint_log_likelihood(data);
  normalize_log_proba(p, static_cast<std::size_t>(num_classes_));
  return p;
}

std::vector<std::int64_t> MultinomialNB::predict(const LocalData& data) const {
  return argmax_rows(joint_log_likelihood(data), static_cast<std::size_t>(num_classes_));
}

double MultinomialNB::score(const LocalData& data, comm::Communicator& comm) const {
  return global_accuracy(comm, data, predict(data));
}

nlohmann::json MultinomialNB::to_json() const {
  check_fitted(num_classes_, kMultinomial, "to_json");
  return {{"estimator", kMultinomial},
          {"version", 1},
          {"options", {{"alpha", options_.alpha}, {"fit_prior", options_.fit_prior}}},
          {"num_classes", num_classes_},
          {"features", features_},
          {"class_count", class_count_},
          {"feature_count", feature_count_},
          {"class_log_prior", class_log_prior_},
          {"feature_log_prob", feature_log_prob_},
          {"class_names", class_names_}};
}

MultinomialNB MultinomialNB::from_json(const nlohmann::json& j) {
  return parse_or_throw<MultinomialNB>(kMultinomial, j, [](const nlohmann::json& j) {
    const auto& jo = model_field(j, "options", kMultinomial);
    MultinomialNBOptions o;
    o.alpha = model_field(jo, "alpha", kMultinomial).get<double>();
    o.fit_prior = model_field(jo, "fit_prior", kMultinomial).get<bool>();
    MultinomialNB m(o);
    m.num_classes_ = model_integer<std::int64_t>(j, "num_classes", kMultinomial);
    m.features_ = model_integer<std::size_t>(j, "features", kMultinomial);
    m.class_count_ = model_field(j, "class_count", kMultinomial).get<std::vector<double>>();
    m.feature_count_ = model_field(j, "feature_count", kMultinomial).get<std::vector<double>>();
    m.class_log_prior_ = model_field(j, "class_log_prior", kMultinomial).get<std::vector<double>>();
    m.feature_log_prob_ =
        model_field(j, "feature_log_prob", kMultinomial).get<std::vector<double>>();
    m.class_names_ = model_field(j, "class_names", kMultinomial).get<std::vector<std::string>>();
    check_sizes(kMultinomial, m.num_classes_, m.features_,
                {{&m.class_count_, false},
                 {&m.feature_count_, true},
                 {&m.class_log_prior_, false},
                 {&m.feature_log_prob_, true}});
    return m;
  });
}

}  // namespace distml::ml
