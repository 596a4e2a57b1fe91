#include "distml/ml/random_forest.h"

#include <algorithm>
#include <charconv>
#include <cmath>

#include "distml/core/error.h"
#include "distml/ml/estimator_support.h"
#include "distml/ml/exact_sum.h"
#include "distml/ml/gbdt_binning.h"
#include "distml/ml/kmeans_local.h"
#include "distml/ml/tree_links.h"

namespace distml::ml {
namespace {

constexpr std::string_view kForest = "random_forest";
// derive_seed streams of the bootstrap and of the trees' feature draws.
constexpr std::uint64_t kBootstrapStream = 0x626f6f74, kTreeStream = 0x74726565;
// A row's bootstrap weight is capped here (P(Poisson(1) > 16) < 1e-14), which bounds the terms
// of every weighted sum and so the grid that makes them exact.
constexpr double kMaxWeight = 16;

// max_features as a count of `features`, or 0 when the text is not valid.
std::size_t max_features_count(std::string_view v, std::size_t features, bool classifier) {
  const auto n = static_cast<double>(features);
  if (v == "auto") v = classifier ? "sqrt" : "all";
  if (v == "all") return features;
  if (v == "sqrt") return std::max<std::size_t>(1, static_cast<std::size_t>(std::sqrt(n)));
  if (v == "log2") return std::max<std::size_t>(1, static_cast<std::size_t>(std::log2(n)));
  if (v.find('.') != std::string_view::npos) {
    double fraction = 0;
    const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), fraction);
    if (ec != std::errc{} || end != v.data() + v.size() || !(fraction > 0 && fraction <= 1))
      return 0;
    return std::max<std::size_t>(1, static_cast<std::size_t>(fraction * n));
  }
  std::size_t count = 0;
  const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), count);
  if (ec != std::errc{} || end != v.data() + v.size()) return 0;
  return std::min(count, features);
}

void validate(const RandomForestOptions& o) {
  require_option(o.criterion == "auto" || o.criterion == "gini" || o.criterion == "squared_error",
                 kForest, "criterion", "\"auto\", \"gini\" or \"squared_error\"");
  require_option(o.n_estimators >= 1, kForest, "n_estimators", "at least 1");
  require_option(o.max_depth >= 0, kForest, "max_depth", "non-negative (0: no limit)");
  require_option(o.min_samples_leaf >= 1, kForest, "min_samples_leaf", "at least 1");
  require_option(max_features_count(o.max_features, 1, true) > 0, kForest, "max_features",
                 "auto, sqrt, log2, all, a fraction in (0, 1] (with a '.') or a count >= 1");
  require_option(o.max_samples > 0 && o.max_samples <= 1, kForest, "max_samples", "in (0, 1]");
  require_option(o.max_bins >= 2 && o.max_bins <= 255, kForest, "max_bins", "in [2, 255]");
}

// Poisson(mean) by inversion, capped at kMaxWeight.
double poisson(double mean, double u) {
  double p = std::exp(-mean), cumulative = p, k = 0;
  while (u > cumulative && k < kMaxWeight) {
    ++k;
    p *= mean / k;
    cumulative += p;
  }
  return k;
}

nlohmann::json tree_to_json(const ForestTree& t) {
  nlohmann::json nodes = nlohmann::json::array();
  for (const ForestNode& n : t.nodes) {
    if (n.is_leaf()) {
      nodes.push_back({{"value", n.value}, {"weight", n.weight}});
      continue;
    }
    nodes.push_back({{"feature", n.feature},
                     {"threshold", n.threshold},
                     {"missing_left", n.missing_left},
                     {"left", n.left},
                     {"right", n.right},
                     {"gain", n.gain},
                     {"weight", n.weight}});
  }
  return nodes;
}

ForestTree tree_from_json(const nlohmann::json& j, std::size_t features, std::size_t outputs) {
  ForestTree t;
  for (const auto& jn : j) {
    ForestNode n;
    n.weight = model_field(jn, "weight", kForest).get<double>();
    if (jn.contains("value")) {
      n.value = jn["value"].get<std::vector<double>>();
    } else {
      n.feature = model_integer<int>(jn, "feature", kForest);
      n.threshold = model_field(jn, "threshold", kForest).get<double>();
      n.missing_left = model_field(jn, "missing_left", kForest).get<bool>();
      n.left = model_integer<int>(jn, "left", kForest);
      n.right = model_integer<int>(jn, "right", kForest);
      n.gain = model_field(jn, "gain", kForest).get<double>();
    }
    t.nodes.push_back(std::move(n));
  }
  check_tree_links(t.nodes, features, kForest);
  for (std::size_t i = 0; i < t.nodes.size(); ++i)
    if (t.nodes[i].is_leaf() && t.nodes[i].value.size() != outputs)
      throw DataError(cat(kForest, " model: leaf ", i, " has ", t.nodes[i].value.size(),
                          " values, not ", outputs));
  return t;
}

}  // namespace

void set_option(RandomForestOptions& options, std::string_view key, std::string_view value) {
  RandomForestOptions o = options;  // `options` stays valid when `value` is not
  if (key == "criterion")
    o.criterion = std::string(value);
  else if (key == "n_estimators")
    o.n_estimators = parse_int_option(key, value);
  else if (key == "max_depth")
    o.max_depth = parse_int_option(key, value);
  else if (key == "min_samples_leaf")
    o.min_samples_leaf = parse_int_option(key, value);
  else if (key == "max_features")
    o.max_features = std::string(value);
  else if (key == "bootstrap")
    o.bootstrap = parse_bool_option(key, value);
  else if (key == "max_samples")
    o.max_samples = parse_double_option(key, value);
  else if (key == "max_bins")
    o.max_bins = parse_int_option(key, value);
  else if (key == "seed")
    o.seed = parse_uint64_option(key, value);
  else
    throw_unknown_option(kForest, key,
                         {"criterion", "n_estimators", "max_depth", "min_samples_leaf",
                          "max_features", "bootstrap", "max_samples", "max_bins", "seed"});
  validate(o);
  options = std::move(o);
}

RandomForest::RandomForest(RandomForestOptions options) : options_(std::move(options)) {
  validate(options_);
}

void RandomForest::fit(const LocalData& data, comm::Communicator& comm) {
  validate(options_);
  const std::string criterion = options_.criterion != "auto" ? options_.criterion
                                : data.num_classes > 0       ? "gini"
                                                             : "squared_error";
  const bool classifier = criterion == "gini";
  throw_if_any_rank_failed(comm, check_tree_shard(data, !classifier, kForest));
  check_shards_agree(comm, data, kForest);

  const auto bins = FeatureBins::fit(data, options_.max_bins, comm, AbsentEntries::zero);
  const auto binned = bins.bin_rows(data);
  std::vector<double> y(data.rows), y_squared, weight(data.rows, 1.0);
  const double max_terms = kMaxWeight * static_cast<double>(data.global_rows);
  if (classifier) {
    for (std::size_t i = 0; i < data.rows; ++i) y[i] = static_cast<double>(data.y[i]);
  } else {
    y = data.targets;
    round_for_exact_sums(comm, y, max_terms);
    for (double v : y) y_squared.push_back(v * v);
    round_for_exact_sums(comm, y_squared, max_terms);
  }
  const ForestGrowth growth{classifier ? static_cast<std::size_t>(data.num_classes) : 0,
                            options_.max_depth, static_cast<double>(options_.min_samples_leaf),
                            max_features_count(options_.max_features, data.features, classifier)};
  const auto first_row =
      static_cast<std::uint64_t>(exclusive_prefix(comm, static_cast<std::int64_t>(data.rows)));

  criterion_ = criterion;
  num_classes_ = classifier ? data.num_classes : 0;
  features_ = data.features;
  trees_.clear();
  ForestGrower grower(bins, growth);
  for (int t = 0; t < options_.n_estimators; ++t) {
    const auto tree = static_cast<std::uint64_t>(t);
    if (options_.bootstrap) {
      const std::uint64_t seed = data::derive_seed(options_.seed, kBootstrapStream, tree);
      for (std::size_t i = 0; i < data.rows; ++i) {
        data::SplitMix64 rng(data::derive_seed(seed, first_row + i));
        weight[i] = poisson(options_.max_samples, rng.uniform());
      }
    }
    trees_.push_back(grower.grow({binned, y, y_squared, weight},
                                 data::derive_seed(options_.seed, kTreeStream, tree), comm));
  }
}

std::vector<double> RandomForest::feature_importances() const {
  std::vector<double> importance(features_, 0.0), tree_gain(features_);
  for (const ForestTree& t : trees_) {
    std::fill(tree_gain.begin(), tree_gain.end(), 0.0);
    double total = 0;
    for (const ForestNode& n : t.nodes)
      if (!n.is_leaf()) {
        tree_gain[static_cast<std::size_t>(n.feature)] += n.gain;
        total += n.gain;
      }
    if (total > 0)
      for (std::size_t f = 0; f < features_; ++f) importance[f] += tree_gain[f] / total;
  }
  double sum = 0;
  for (double v : importance) sum += v;
  if (sum > 0)
    for (double& v : importance) v /= sum;
  return importance;
}

void RandomForest::check_fitted(std::string_view what) const {
  if (trees_.empty()) throw DataError(cat(kForest, ": ", what, " before fit"));
}

std::vector<double> RandomForest::mean_leaf_values(const LocalData& data) const {
  check_feature_count(data, features_, kForest);
  const std::size_t k = classifier() ? static_cast<std::size_t>(num_classes_) : 1;
  std::vector<double> out(data.rows * k, 0.0), scratch;
  const double scale = 1.0 / static_cast<double>(trees_.size());
  for (std::size_t i = 0; i < data.rows; ++i) {
    const double* x = data.dense_row(i, scratch);
    double* o = out.data() + i * k;
    for (const ForestTree& t : trees_) {
      const auto& v = t.predict(x);
      for (std::size_t m = 0; m < k; ++m) o[m] += v[m];
    }
    for (std::size_t m = 0; m < k; ++m) o[m] *= scale;
  }
  return out;
}

std::vector<double> RandomForest::predict_proba(const LocalData& data) const {
  check_fitted("predict_proba");
  if (!classifier()) throw DataError(cat(kForest, ": predict_proba of a ", criterion_, " model"));
  return mean_leaf_values(data);
}

std::vector<std::int64_t> RandomForest::predict(const LocalData& data) const {
  check_fitted("predict");
  if (!classifier())
    throw DataError(cat(kForest, ": a ", criterion_, " model predicts values (predict_values)"));
  const auto p = mean_leaf_values(data);
  const auto k = static_cast<std::size_t>(num_classes_);
  std::vector<std::int64_t> out(data.rows);
  for (std::size_t i = 0; i < data.rows; ++i) out[i] = argmax(p.data() + i * k, k);
  return out;
}

std::vector<double> RandomForest::predict_values(const LocalData& data) const {
  check_fitted("predict_values");
  if (classifier()) throw DataError(cat(kForest, ": a gini model predicts class ids"));
  return mean_leaf_values(data);
}

double RandomForest::score(const LocalData& data, comm::Communicator& comm) const {
  if (classifier()) return global_accuracy(comm, data, predict(data));
  return global_r2(comm, data, predict_values(data), kForest);
}

nlohmann::json RandomForest::to_json() const {
  check_fitted("to_json");
  nlohmann::json trees = nlohmann::json::array();
  for (const auto& t : trees_) trees.push_back(tree_to_json(t));
  return {{"estimator", kForest},
          {"version", 1},
          {"options", options_},
          {"criterion", criterion_},
          {"num_classes", num_classes_},
          {"features", features_},
          {"feature_importances", feature_importances()},  // for readers; not read back
          {"trees", trees}};
}

RandomForest RandomForest::from_json(const nlohmann::json& j) {
  try {
    if (model_field(j, "estimator", kForest) != kForest || model_field(j, "version", kForest) != 1)
      throw DataError(cat("not a version 1 ", kForest, " model"));
    RandomForest m(model_options<RandomForestOptions>(j, kForest));
    m.criterion_ = model_field(j, "criterion", kForest).get<std::string>();
    m.num_classes_ = model_integer<std::int64_t>(j, "num_classes", kForest);
    m.features_ = model_integer<std::size_t>(j, "features", kForest);
    const bool classifier = m.criterion_ == "gini";
    if ((!classifier && m.criterion_ != "squared_error") || (classifier && m.num_classes_ < 2))
      throw DataError(
          cat(kForest, " model: criterion ", m.criterion_, " with ", m.num_classes_, " classes"));
    const std::size_t outputs = classifier ? static_cast<std::size_t>(m.num_classes_) : 1;
    for (const auto& jt : model_field(j, "trees", kForest))
      m.trees_.push_back(tree_from_json(jt, m.features_, outputs));
    if (m.trees_.empty()) throw DataError(cat(kForest, " model: no trees"));
    return m;
  } catch (const nlohmann::json::exception& e) {
    throw DataError(cat(kForest, " model: ", e.what()));
  } catch (const ConfigError& e) {
    throw DataError(cat(kForest, " model: ", e.what()));
  }
}

}  // namespace distml::ml
