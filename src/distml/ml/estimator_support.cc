#include "distml/ml/estimator_support.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <mutex>

#include "distml/core/error.h"

namespace distml::ml {

void allreduce_sum(comm::Communicator& comm, std::vector<double>& v) {
  comm.allreduce(comm::Buffer{v.data(), v.size(), comm::DType::f64});
}

std::string check_classification_shard(const LocalData& data, std::string_view who) {
  if (std::string shape = shape_problem(data, who); !shape.empty()) return shape;
  if (data.y.size() != data.rows)
    return cat(who, ": needs a class id per row; y holds ", data.y.size(), " for ", data.rows,
               " rows");
  if (data.num_classes < 2) return cat(who, ": needs at least 2 classes, got ", data.num_classes);
  for (std::size_t i = 0; i < data.rows; ++i)
    if (data.y[i] < 0 || data.y[i] >= data.num_classes)
      return cat(who, ": row ", i, " of this rank has class id ", data.y[i], ", outside [0, ",
                 data.num_classes, ")");
  return {};
}

void check_shards_agree(comm::Communicator& comm, const LocalData& data, std::string_view who) {
  const auto features = static_cast<double>(data.features);
  const auto classes = static_cast<double>(data.num_classes);
  const auto claimed = static_cast<double>(data.global_rows);
  // Maxima of v and -v give the range of each value over ranks.
  std::vector<double> extremes{features, -features, classes, -classes, claimed, -claimed};
  comm.allreduce(comm::Buffer{extremes.data(), extremes.size(), comm::DType::f64},
                 {comm::ReduceOp::max});
  auto rows = static_cast<double>(data.rows);
  comm.allreduce(comm::Buffer{&rows, 1, comm::DType::f64});
  // Every value compared below is global, so all ranks throw together.
  if (extremes[0] != -extremes[1])
    throw DataError(cat(who, ": ranks disagree on the number of features (", -extremes[1], " to ",
                        extremes[0], ")"));
  if (extremes[2] != -extremes[3])
    throw DataError(
        cat(who, ": ranks disagree on num_classes (", -extremes[3], " to ", extremes[2], ")"));
  if (rows == 0) throw DataError(cat(who, ": no rows on any rank"));
  if (extremes[4] != rows || -extremes[5] != rows)
    throw DataError(cat(who, ": global_rows (", -extremes[5], " to ", extremes[4],
                        ") is not the sum of rows over ranks (", rows, ")"));
}

double global_accuracy(comm::Communicator& comm, const LocalData& data,
                       const std::vector<std::int64_t>& predicted) {
  DML_CHECK_EQ(predicted.size(), data.rows, "one prediction per row");
  std::string error;
  if (data.y.size() != data.rows) error = cat("score needs a class id per row");
  throw_if_any_rank_failed(comm, error);
  std::vector<double> counts{0, static_cast<double>(data.rows)};
  for (std::size_t i = 0; i < data.rows; ++i) counts[0] += predicted[i] == data.y[i] ? 1 : 0;
  allreduce_sum(comm, counts);
  if (counts[1] == 0) throw DataError("score: no rows on any rank");
  return counts[0] / counts[1];
}

double sigmoid(double z) {
  if (z >= 0) return 1 / (1 + std::exp(-z));
  const double e = std::exp(z);
  return e / (1 + e);
}

double logistic_loss(double margin) {
  return std::log1p(std::exp(-std::abs(margin))) + std::max(-margin, 0.0);
}

double global_r2(comm::Communicator& comm, const LocalData& data,
                 const std::vector<double>& predicted, std::string_view who) {
  DML_CHECK_EQ(predicted.size(), data.rows, "one prediction per row");
  std::string error;
  if (data.targets.size() != data.rows) error = cat(who, ": score needs a target per row");
  throw_if_any_rank_failed(comm, error);
  std::vector<double> sums{0, static_cast<double>(data.rows)};
  for (double t : data.targets) sums[0] += t;
  allreduce_sum(comm, sums);
  if (sums[1] == 0) throw DataError(cat(who, ": score: no rows on any rank"));
  const double mean = sums[0] / sums[1];
  std::vector<double> squares{0, 0};  // residual, total
  for (std::size_t i = 0; i < data.rows; ++i) {
    squares[0] += (data.targets[i] - predicted[i]) * (data.targets[i] - predicted[i]);
    squares[1] += (data.targets[i] - mean) * (data.targets[i] - mean);
  }
  allreduce_sum(comm, squares);
  return squares[1] > 0 ? 1 - squares[0] / squares[1] : (squares[0] == 0 ? 1.0 : 0.0);
}

std::string check_tree_shard(const LocalData& d, bool regression, std::string_view who) {
  if (std::string shape = shape_problem(d, who); !shape.empty()) return shape;
  std::string error;
  for (std::size_t i = 0; i < d.rows && error.empty(); ++i)
    d.for_each_entry(i, [&](std::size_t j, double v) {
      if (error.empty() && std::isinf(v))
        error = cat(who, ": row ", i, " feature ", j, " is infinite");
    });
  if (!error.empty()) return error;
  if (!regression) return check_classification_shard(d, who);
  if (d.targets.size() != d.rows)
    return cat(who, ": regression needs a real-valued target per row; targets holds ",
               d.targets.size(), " for ", d.rows, " rows");
  for (double t : d.targets)
    if (!std::isfinite(t)) return cat(who, ": a target is not finite");
  return {};
}

double log_sum_exp(const double* z, std::size_t n) {
  double m = -std::numeric_limits<double>::infinity();
  for (std::size_t k = 0; k < n; ++k) m = std::max(m, z[k]);
  if (!std::isfinite(m)) return m;
  double s = 0;
  for (std::size_t k = 0; k < n; ++k) s += std::exp(z[k] - m);
  return m + std::log(s);
}

void normalize_log_proba(std::vector<double>& v, std::size_t n) {
  for (std::size_t r = 0; r + n <= v.size(); r += n) {
    const double lse = log_sum_exp(v.data() + r, n);
    for (std::size_t k = 0; k < n; ++k) v[r + k] = std::exp(v[r + k] - lse);
  }
}

std::int64_t argmax(const double* z, std::size_t n) {
  return static_cast<std::int64_t>(std::max_element(z, z + n) - z);
}

std::vector<double> linear_decision(const LocalData& data, const std::vector<double>& coef,
                                    const std::vector<double>& intercept, std::size_t outputs) {
  std::vector<double> z(data.rows * outputs);
  for (std::size_t i = 0; i < data.rows; ++i)
    for (std::size_t m = 0; m < outputs; ++m)
      z[i * outputs + m] = intercept[m] + data.dot(i, coef.data() + m * data.features);
  return z;
}

void check_feature_count(const LocalData& data, std::size_t features, std::string_view who) {
  if (data.features != features)
    throw DataError(cat(who, ": the model was fitted on ", features, " features, the data has ",
                        data.features));
  if (std::string shape = shape_problem(data, who); !shape.empty()) throw DataError(shape);
}

std::string dense_problem(const LocalData& data, std::string_view who) {
  if (!data.sparse) return {};
  return cat(who, ": needs dense rows (densify sparse ones first, as distml fit does)");
}

double parse_double_option(std::string_view key, std::string_view value) {
  double v = 0;
  const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
  if (ec != std::errc() || end != value.data() + value.size() || !std::isfinite(v))
    throw ConfigError(cat(key, ": expected a number, got \"", value, "\""));
  return v;
}

int parse_int_option(std::string_view key, std::string_view value) {
  int v = 0;
  const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
  if (ec != std::errc() || end != value.data() + value.size())
    throw ConfigError(cat(key, ": expected an integer, got \"", value, "\""));
  return v;
}

std::uint64_t parse_uint64_option(std::string_view key, std::string_view value) {
  std::uint64_t v = 0;
  const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
  if (ec != std::errc() || end != value.data() + value.size())
    throw ConfigError(cat(key, ": expected a non-negative integer, got \"", value, "\""));
  return v;
}

bool parse_bool_option(std::string_view key, std::string_view value) {
  if (value == "true" || value == "1") return true;
  if (value == "false" || value == "0") return false;
  throw ConfigError(cat(key, ": expected true or false, got \"", value, "\""));
}

void throw_unknown_option(std::string_view who, std::string_view key,
                          std::initializer_list<std::string_view> valid) {
  std::string list;
  for (auto k : valid) list += (list.empty() ? "" : ", ") + std::string(k);
  throw ConfigError(cat(who, ": unknown option \"", key, "\"; valid options: ", list));
}

void require_option(bool ok, std::string_view who, std::string_view key, std::string_view must) {
  if (!ok) throw ConfigError(cat(who, ": ", key, " must be ", must));
}

const nlohmann::json& model_field(const nlohmann::json& j, const char* key, std::string_view who) {
  if (!j.is_object() || !j.contains(key))
    throw DataError(cat(who, " model: missing field \"", key, "\""));
  return j.at(key);
}

// Weak, so that a BLAS without this function links too.
extern "C" void openblas_set_num_threads(int) __attribute__((weak));

void use_one_blas_thread() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (openblas_set_num_threads) openblas_set_num_threads(1);
  });
}

}  // namespace distml::ml
