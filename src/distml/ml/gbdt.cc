#include "distml/ml/gbdt.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "distml/core/error.h"
#include "distml/ml/estimator_support.h"
#include "distml/ml/exact_sum.h"
#include "distml/ml/gbdt_binning.h"
#include "distml/ml/kmeans_local.h"
#include "distml/ml/preprocessing.h"
#include "distml/ml/tree_links.h"

namespace distml::ml {
namespace {

constexpr std::string_view kGbdt = "gbdt";
// A sparse row's absent entry, as XGBoost reads LibSVM files (gbdt.h).
constexpr double kAbsentIsMissing = std::numeric_limits<double>::quiet_NaN();
// derive_seed streams of the row and feature samples.
constexpr std::uint64_t kRowStream = 0x726f7773, kColumnStream = 0x636f6c73;

void validate(const GBDTOptions& o) {
  require_option(o.loss == "auto" || o.loss == "log_loss" || o.loss == "squared_error", kGbdt,
                 "loss", "\"auto\", \"log_loss\" or \"squared_error\"");
  require_option(o.max_iter >= 1, kGbdt, "max_iter", "at least 1");
  require_option(o.learning_rate > 0, kGbdt, "learning_rate", "positive");
  require_option(o.max_leaf_nodes == 0 || o.max_leaf_nodes >= 2, kGbdt, "max_leaf_nodes",
                 "at least 2, or 0 for no limit");
  require_option(o.max_depth >= 0, kGbdt, "max_depth", "non-negative (0: no limit)");
  require_option(o.max_leaf_nodes > 0 || o.max_depth > 0, kGbdt, "max_leaf_nodes",
                 "set (or max_depth) to bound the trees");
  require_option(o.growth == "leafwise" || o.growth == "depthwise", kGbdt, "growth",
                 "\"leafwise\" or \"depthwise\"");
  require_option(o.min_samples_leaf >= 1, kGbdt, "min_samples_leaf", "at least 1");
  require_option(o.l2_regularization >= 0, kGbdt, "l2_regularization", "non-negative");
  require_option(o.min_child_weight >= 0, kGbdt, "min_child_weight", "non-negative");
  require_option(o.subsample > 0 && o.subsample <= 1, kGbdt, "subsample", "in (0, 1]");
  require_option(o.colsample_bytree > 0 && o.colsample_bytree <= 1, kGbdt, "colsample_bytree",
                 "in (0, 1]");
  require_option(o.max_bins >= 2 && o.max_bins <= 255, kGbdt, "max_bins", "in [2, 255]");
  require_option(o.validation_fraction > 0 && o.validation_fraction < 1, kGbdt,
                 "validation_fraction", "in (0, 1)");
  require_option(o.n_iter_no_change >= 1, kGbdt, "n_iter_no_change", "at least 1");
  require_option(o.tol >= 0, kGbdt, "tol", "non-negative");
}

// The loss of each row at raw scores z (rows x k), and its gradients and hessians (k x rows,
// class-major so that each tree gets one contiguous span).
class Loss {
 public:
  Loss(const std::string& name, std::size_t outputs)
      : squared_(name == "squared_error"), k_(outputs) {}

  double row_loss(const LocalData& d, std::size_t i, const double* z) const {
    if (squared_) return 0.5 * (z[0] - d.targets[i]) * (z[0] - d.targets[i]);
    if (k_ == 1) {
      return logistic_loss(d.y[i] == 1 ? z[0] : -z[0]);
    }
    return log_sum_exp(z, k_) - z[d.y[i]];
  }

  void gradients(const LocalData& d, const std::vector<double>& raw, std::vector<double>& g,
                 std::vector<double>& h) const {
    const std::size_t n = d.rows;
    g.resize(k_ * n);
    h.resize(k_ * n);
    std::vector<double> p(k_);
    for (std::size_t i = 0; i < n; ++i) {
      const double* z = raw.data() + i * k_;
      if (squared_) {
        g[i] = z[0] - d.targets[i];
        h[i] = 1;
      } else if (k_ == 1) {
        const double q = sigmoid(z[0]);
        g[i] = q - (d.y[i] == 1 ? 1.0 : 0.0);
        h[i] = q * (1 - q);
      } else {
        const double lse = log_sum_exp(z, k_);
        for (std::size_t m = 0; m < k_; ++m) {
          const double q = std::exp(z[m] - lse);
          g[m * n + i] = q - (static_cast<std::int64_t>(m) == d.y[i] ? 1.0 : 0.0);
          h[m * n + i] = q * (1 - q);
        }
      }
    }
  }

 private:
  bool squared_;
  std::size_t k_;
};

// The constant model scikit-learn starts from: log-odds, centred log priors, or the mean.
std::vector<double> fit_baseline(const LocalData& d, const std::string& loss, std::size_t outputs,
                                 comm::Communicator& comm) {
  const double n = static_cast<double>(d.global_rows);
  if (loss == "squared_error") return {exact_global_sum(comm, d.targets) / n};
  std::vector<double> counts(static_cast<std::size_t>(d.num_classes), 0.0);
  for (auto y : d.y) counts[static_cast<std::size_t>(y)] += 1;
  allreduce_sum(comm, counts);
  const double eps = std::numeric_limits<double>::epsilon();
  const auto prior = [&](std::size_t k) { return std::clamp(counts[k] / n, eps, 1 - eps); };
  if (outputs == 1) return {std::log(prior(1) / (1 - prior(1)))};
  std::vector<double> b(outputs);
  double mean = 0;
  for (std::size_t k = 0; k < outputs; ++k) mean += (b[k] = std::log(prior(k))) / outputs;
  for (double& v : b) v -= mean;
  return b;
}

// sklearn's rule: stop when none of the last n_iter_no_change losses improves by more than tol
// on the one before them.
bool should_stop(const std::vector<double>& losses, int n_iter_no_change, double tol) {
  const auto window = static_cast<std::size_t>(n_iter_no_change);
  if (losses.size() < window + 1) return false;
  const double reference = losses[losses.size() - window - 1] - tol;
  for (std::size_t i = losses.size() - window; i < losses.size(); ++i)
    if (losses[i] < reference) return false;
  return true;
}

nlohmann::json tree_to_json(const GBDTTree& t) {
  nlohmann::json nodes = nlohmann::json::array();
  for (const auto& n : t.nodes)
    nodes.push_back({{"feature", n.feature},
                     {"threshold", n.threshold},
                     {"missing_left", n.missing_left},
                     {"gain", n.gain},
                     {"left", n.left},
                     {"right", n.right},
                     {"value", n.value},
                     {"samples", n.samples}});
  return nodes;
}

GBDTTree tree_from_json(const nlohmann::json& j, std::size_t features) {
  GBDTTree t;
  for (const auto& jn : j) {
    GBDTNode n;
    n.feature = model_integer<int>(jn, "feature", kGbdt);
    n.threshold = model_field(jn, "threshold", kGbdt).get<double>();
    n.missing_left = jn.value("missing_left", false);  // absent in files from before it
    n.gain = jn.value("gain", 0.0);
    n.left = model_integer<int>(jn, "left", kGbdt);
    n.right = model_integer<int>(jn, "right", kGbdt);
    n.value = model_field(jn, "value", kGbdt).get<double>();
    n.samples = model_integer<std::int64_t>(jn, "samples", kGbdt);
    t.nodes.push_back(n);
  }
  check_tree_links(t.nodes, features, kGbdt);
  return t;
}

}  // namespace

void set_option(GBDTOptions& options, std::string_view key, std::string_view value) {
  GBDTOptions o = options;  // `options` stays valid when `value` is not
  if (key == "loss")
    o.loss = std::string(value);
  else if (key == "max_iter")
    o.max_iter = parse_int_option(key, value);
  else if (key == "learning_rate")
    o.learning_rate = parse_double_option(key, value);
  else if (key == "max_leaf_nodes")
    o.max_leaf_nodes = parse_int_option(key, value);
  else if (key == "max_depth")
    o.max_depth = parse_int_option(key, value);
  else if (key == "growth")
    o.growth = std::string(value);
  else if (key == "min_samples_leaf")
    o.min_samples_leaf = parse_int_option(key, value);
  else if (key == "l2_regularization")
    o.l2_regularization = parse_double_option(key, value);
  else if (key == "min_child_weight")
    o.min_child_weight = parse_double_option(key, value);
  else if (key == "subsample")
    o.subsample = parse_double_option(key, value);
  else if (key == "colsample_bytree")
    o.colsample_bytree = parse_double_option(key, value);
  else if (key == "max_bins")
    o.max_bins = parse_int_option(key, value);
  else if (key == "early_stopping")
    o.early_stopping = parse_bool_option(key, value);
  else if (key == "validation_fraction")
    o.validation_fraction = parse_double_option(key, value);
  else if (key == "n_iter_no_change")
    o.n_iter_no_change = parse_int_option(key, value);
  else if (key == "tol")
    o.tol = parse_double_option(key, value);
  else if (key == "seed")
    o.seed = parse_uint64_option(key, value);
  else
    throw_unknown_option(kGbdt, key,
                         {"loss", "max_iter", "learning_rate", "max_leaf_nodes", "max_depth",
                          "growth", "min_samples_leaf", "min_child_weight", "l2_regularization",
                          "subsample", "colsample_bytree", "max_bins", "early_stopping",
                          "validation_fraction", "n_iter_no_change", "tol", "seed"});
  validate(o);
  options = std::move(o);
}

GBDT::GBDT(GBDTOptions options) : options_(std::move(options)) { validate(options_); }

void GBDT::fit(const LocalData& data, comm::Communicator& comm) {
  validate(options_);
  const std::string loss = options_.loss != "auto" ? options_.loss
                           : data.num_classes > 0  ? "log_loss"
                                                   : "squared_error";
  throw_if_any_rank_failed(comm, check_tree_shard(data, loss == "squared_error", kGbdt));
  check_shards_agree(comm, data, kGbdt);
  const std::size_t outputs =
      loss == "log_loss" && data.num_classes > 2 ? static_cast<std::size_t>(data.num_classes) : 1;

  LocalData train, validation;
  if (options_.early_stopping) {
    std::tie(train, validation) =
        train_test_split(data, options_.validation_fraction, options_.seed, comm);
    if (train.global_rows == 0 || validation.global_rows == 0)
      throw DataError(cat(kGbdt, ": validation_fraction ", options_.validation_fraction, " leaves ",
                          train.global_rows, " training and ", validation.global_rows,
                          " validation rows"));
  }
  const LocalData& fit_rows = options_.early_stopping ? train : data;

  const auto bins = FeatureBins::fit(fit_rows, options_.max_bins, comm, AbsentEntries::missing);
  const auto binned = bins.bin_rows(fit_rows);
  TreeGrower grower(bins, binned, fit_rows.rows,
                    {options_.max_leaf_nodes, options_.max_depth, options_.growth == "depthwise",
                     options_.min_samples_leaf, options_.min_child_weight,
                     options_.l2_regularization, options_.learning_rate});
  const Loss l(loss, outputs);

  loss_ = loss;
  num_classes_ = data.num_classes;
  features_ = data.features;
  class_names_ = data.class_names;
  baseline_ = fit_baseline(fit_rows, loss, outputs, comm);
  trees_.clear();
  validation_loss_.clear();
  iterations_ = 0;

  std::vector<double> raw(fit_rows.rows * outputs), raw_validation(validation.rows * outputs);
  for (std::size_t i = 0; i < raw.size(); ++i) raw[i] = baseline_[i % outputs];
  for (std::size_t i = 0; i < raw_validation.size(); ++i)
    raw_validation[i] = baseline_[i % outputs];
  std::vector<double> losses(validation.rows);
  const auto record_validation_loss = [&] {
    for (std::size_t i = 0; i < validation.rows; ++i)
      losses[i] = l.row_loss(validation, i, raw_validation.data() + i * outputs);
    validation_loss_.push_back(exact_global_sum(comm, losses) /
                               static_cast<double>(validation.global_rows));
  };
  if (options_.early_stopping) record_validation_loss();

  // Each tree's sample: a row's membership depends on its global index and the tree alone (not
  // on the rank holding it), the features are one seeded draw that every rank makes alike.
  const auto first_row =
      static_cast<std::uint64_t>(exclusive_prefix(comm, static_cast<std::int64_t>(fit_rows.rows)));
  const auto sample_for = [&](int round, std::size_t k) {
    TreeSample s;
    const std::uint64_t tree = static_cast<std::uint64_t>(round) * outputs + k;
    if (options_.subsample < 1) {
      s.all_rows = false;
      const std::uint64_t seed = data::derive_seed(options_.seed, kRowStream, tree);
      for (std::size_t i = 0; i < fit_rows.rows; ++i)
        if (in_test_split(first_row + i, options_.subsample, seed))
          s.rows.push_back(static_cast<std::uint32_t>(i));
    }
    if (options_.colsample_bytree < 1) {
      std::vector<std::size_t> order(features_);
      std::iota(order.begin(), order.end(), std::size_t{0});
      data::SplitMix64 rng(data::derive_seed(options_.seed, kColumnStream, tree));
      for (std::size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[rng.next() % i]);
      const auto keep = std::max<std::size_t>(
          1, static_cast<std::size_t>(std::ceil(options_.colsample_bytree * features_)));
      s.features.assign(features_, false);
      for (std::size_t i = 0; i < keep; ++i) s.features[order[i]] = true;
    }
    return s;
  };
  std::vector<double> g, h, row;
  const double n = static_cast<double>(fit_rows.global_rows);
  const std::size_t rows = fit_rows.rows;
  std::vector<std::span<double>> rounded;  // every class's gradients, then hessians
  std::vector<TreeTask> tasks(outputs);
  for (int round = 0; round < options_.max_iter; ++round) {
    l.gradients(fit_rows, raw, g, h);
    rounded.clear();
    for (auto* v : {&g, &h})
      for (std::size_t k = 0; k < outputs; ++k) rounded.emplace_back(v->data() + k * rows, rows);
    round_each_for_exact_sums(comm, rounded, n);
    for (std::size_t k = 0; k < outputs; ++k)
      tasks[k] = {rounded[k], rounded[outputs + k], raw.data() + k, outputs, sample_for(round, k)};
    // The round's K trees grow together: one all-reduce a step for all of them.
    for (GBDTTree& tree : grower.grow(tasks, comm)) trees_.push_back(std::move(tree));
    const std::span round_trees(trees_.end() - static_cast<std::ptrdiff_t>(outputs), trees_.end());
    for (std::size_t k = 0; k < outputs; ++k)
      for (std::size_t i = 0; i < validation.rows; ++i)
        raw_validation[i * outputs + k] +=
            round_trees[k].predict(validation.dense_row(i, row, kAbsentIsMissing));
    ++iterations_;
    if (!options_.early_stopping) continue;
    record_validation_loss();
    if (should_stop(validation_loss_, options_.n_iter_no_change, options_.tol)) break;
  }
}

std::vector<double> GBDT::feature_importances() const {
  std::vector<double> gain(features_, 0.0);
  double total = 0;
  for (const GBDTTree& t : trees_)
    for (const GBDTNode& n : t.nodes)
      if (!n.is_leaf()) {
        gain[static_cast<std::size_t>(n.feature)] += n.gain;
        total += n.gain;
      }
  if (total > 0)
    for (double& g : gain) g /= total;
  return gain;
}

void GBDT::check_fitted(std::string_view what) const {
  if (baseline_.empty()) throw DataError(cat(kGbdt, ": ", what, " before fit"));
}

std::vector<double> GBDT::decision_function(const LocalData& data) const {
  check_fitted("decision_function");
  check_feature_count(data, features_, kGbdt);
  const std::size_t k = outputs();
  std::vector<double> z(data.rows * k), scratch;
  for (std::size_t i = 0; i < data.rows; ++i) {
    const double* x = data.dense_row(i, scratch, kAbsentIsMissing);
    for (std::size_t m = 0; m < k; ++m) z[i * k + m] = baseline_[m];
    for (std::size_t t = 0; t < trees_.size(); ++t) z[i * k + t % k] += trees_[t].predict(x);
  }
  return z;
}

std::vector<double> GBDT::predict_proba(const LocalData& data) const {
  check_fitted("predict_proba");
  if (!classifier()) throw DataError(cat(kGbdt, ": predict_proba of a ", loss_, " model"));
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

std::vector<std::int64_t> GBDT::predict(const LocalData& data) const {
  check_fitted("predict");
  if (!classifier())
    throw DataError(cat(kGbdt, ": a ", loss_, " model predicts values (predict_values)"));
  const auto z = decision_function(data);
  const std::size_t k = outputs();
  std::vector<std::int64_t> out(data.rows);
  for (std::size_t i = 0; i < data.rows; ++i)
    out[i] = k == 1 ? (z[i] > 0 ? 1 : 0) : argmax(z.data() + i * k, k);
  return out;
}

std::vector<double> GBDT::predict_values(const LocalData& data) const {
  check_fitted("predict_values");
  if (classifier()) throw DataError(cat(kGbdt, ": a log_loss model predicts class ids"));
  return decision_function(data);
}

double GBDT::score(const LocalData& data, comm::Communicator& comm) const {
  if (classifier()) return global_accuracy(comm, data, predict(data));
  return global_r2(comm, data, predict_values(data), kGbdt);
}

nlohmann::json GBDT::to_json() const {
  check_fitted("to_json");
  nlohmann::json trees = nlohmann::json::array();
  for (const auto& t : trees_) trees.push_back(tree_to_json(t));
  return {{"estimator", kGbdt},
          {"version", 1},
          {"options", options_},
          {"loss", loss_},
          {"num_classes", num_classes_},
          {"features", features_},
          {"class_names", class_names_},
          {"baseline", baseline_},
          {"iterations", iterations_},
          {"validation_loss", validation_loss_},
          {"feature_importances", feature_importances()},  // for readers; not read back
          {"trees", trees}};
}

GBDT GBDT::from_json(const nlohmann::json& j) {
  try {
    if (model_field(j, "estimator", kGbdt) != kGbdt || model_field(j, "version", kGbdt) != 1)
      throw DataError(cat("not a version 1 ", kGbdt, " model"));
    const auto o = model_options<GBDTOptions>(j, kGbdt);
    GBDT m(o);
    m.loss_ = model_field(j, "loss", kGbdt).get<std::string>();
    m.num_classes_ = model_integer<std::int64_t>(j, "num_classes", kGbdt);
    m.features_ = model_integer<std::size_t>(j, "features", kGbdt);
    m.class_names_ = model_field(j, "class_names", kGbdt).get<std::vector<std::string>>();
    m.baseline_ = model_field(j, "baseline", kGbdt).get<std::vector<double>>();
    m.iterations_ = model_integer<int>(j, "iterations", kGbdt);
    m.validation_loss_ = model_field(j, "validation_loss", kGbdt).get<std::vector<double>>();
    for (const auto& jt : model_field(j, "trees", kGbdt))
      m.trees_.push_back(tree_from_json(jt, m.features_));
    const bool classifier = m.loss_ == "log_loss";
    const std::size_t outputs =
        classifier && m.num_classes_ > 2 ? static_cast<std::size_t>(m.num_classes_) : 1;
    if ((!classifier && m.loss_ != "squared_error") || (classifier && m.num_classes_ < 2) ||
        m.baseline_.size() != outputs ||
        m.trees_.size() != static_cast<std::size_t>(m.iterations_) * outputs)
      throw DataError(cat(kGbdt, " model: loss ", m.loss_, ", ", m.num_classes_, " classes, ",
                          m.baseline_.size(), " baselines and ", m.trees_.size(), " trees for ",
                          m.iterations_, " rounds do not fit together"));
    return m;
  } catch (const nlohmann::json::exception& e) {
    throw DataError(cat(kGbdt, " model: ", e.what()));
  } catch (const ConfigError& e) {
    throw DataError(cat(kGbdt, " model: ", e.what()));
  }
}

}  // namespace distml::ml
