#include "distml/ml/imputer.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "distml/core/error.h"

namespace distml::ml {
namespace {

std::string feature_name(const LocalData& d, std::size_t c) {
  return c < d.feature_names.size() ? cat("'", d.feature_names[c], "'") : cat(c + 1);
}

// The present values of feature c on every rank.
std::vector<double> present_values(const LocalData& d, std::size_t c, comm::Communicator& comm) {
  std::vector<double> mine;
  for (std::size_t i = 0; i < d.rows; ++i)
    if (const double v = d.x[i * d.features + c]; !std::isnan(v)) mine.push_back(v);
  std::int64_t n = static_cast<std::int64_t>(mine.size());
  std::vector<std::int64_t> counts(comm.size());
  comm.allgather(comm::ConstBuffer{&n, 1, comm::DType::i64},
                 comm::Buffer{counts.data(), counts.size(), comm::DType::i64});
  const std::vector<std::size_t> sizes(counts.begin(), counts.end());
  std::vector<double> all(std::accumulate(sizes.begin(), sizes.end(), std::size_t{0}));
  comm.allgatherv(comm::cview(mine), comm::view(all), sizes);
  return all;
}

double median_of(std::vector<double> v) {
  const std::size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid), v.end());
  const double upper = v[mid];
  if (v.size() % 2 == 1) return upper;
  const double lower = *std::max_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid));
  return (lower + upper) / 2;
}

}  // namespace

void Imputer::apply(LocalData& d) const {
  if (d.features != values.size())
    throw DataError(
        cat("imputer: the data has ", d.features, " features, the imputer ", values.size()));
  for (std::size_t i = 0; i < d.rows; ++i)
    for (std::size_t c = 0; c < d.features; ++c)
      if (double& v = d.x[i * d.features + c]; std::isnan(v)) v = values[c];
}

nlohmann::json Imputer::to_json() const { return {{"strategy", strategy}, {"values", values}}; }

Imputer Imputer::from_json(const nlohmann::json& j) {
  try {
    return {j.at("strategy").get<std::string>(), j.at("values").get<std::vector<double>>()};
  } catch (const nlohmann::json::exception& e) {
    throw DataError(cat("imputer: expected \"strategy\" and an array \"values\": ", e.what()));
  }
}

Imputer fit_imputer(const LocalData& d, const std::string& strategy, comm::Communicator& comm) {
  if (strategy != "mean" && strategy != "median")
    throw ConfigError(cat("--impute ", strategy, ": expected mean or median"));
  Imputer imputer{strategy, std::vector<double>(d.features)};
  const auto missing_everywhere = [&](std::size_t c) {
    return DataError(cat("feature ", feature_name(d, c), " is missing on every row, so it has no ",
                         strategy, " to fill it with"));
  };
  if (strategy == "median") {
    for (std::size_t c = 0; c < d.features; ++c) {
      const auto all = present_values(d, c, comm);
      if (all.empty()) throw missing_everywhere(c);
      imputer.values[c] = median_of(all);
    }
    return imputer;
  }
  std::vector<double> sums(2 * d.features, 0.0);  // per feature: the sum, the count present
  for (std::size_t i = 0; i < d.rows; ++i)
    for (std::size_t c = 0; c < d.features; ++c)
      if (const double v = d.x[i * d.features + c]; !std::isnan(v)) {
        sums[c] += v;
        sums[d.features + c] += 1;
      }
  comm.allreduce(comm::view(sums));
  for (std::size_t c = 0; c < d.features; ++c) {
    if (sums[d.features + c] == 0) throw missing_everywhere(c);
    imputer.values[c] = sums[c] / sums[d.features + c];
  }
  return imputer;
}

}  // namespace distml::ml
