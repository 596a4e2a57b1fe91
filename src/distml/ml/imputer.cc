#include "distml/ml/imputer.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

#include "distml/core/error.h"

namespace distml::ml {
namespace {

std::string feature_name(const LocalData& d, std::size_t c) {
  return c < d.feature_names.size() ? cat("'", d.feature_names[c], "'") : cat(c + 1);
}

// An order-preserving map of the doubles that are not NaN to unsigned integers: a < b exactly
// when key(a) < key(b). -0.0 is taken as +0.0, as the two compare equal.
constexpr std::uint64_t kSignBit = std::uint64_t{1} << 63;
std::uint64_t order_key(double v) {
  const auto bits = std::bit_cast<std::uint64_t>(v == 0 ? 0.0 : v);
  return bits & kSignBit ? ~bits : bits | kSignBit;
}
double from_order_key(std::uint64_t key) {
  return std::bit_cast<double>(key & kSignBit ? key & ~kSignBit : ~key);
}

// Each feature's count of present (not NaN) values over all ranks.
std::vector<std::int64_t> present_counts(const LocalData& d, comm::Communicator& comm) {
  std::vector<std::int64_t> counts(d.features, 0);
  for (std::size_t i = 0; i < d.rows; ++i)
    for (std::size_t c = 0; c < d.features; ++c) counts[c] += !std::isnan(d.x[i * d.features + c]);
  comm.allreduce(comm::view(counts));
  return counts;
}

struct OrderStatistic {
  double value;
  bool next_equal;  // whether the next one in order is the same value
};

// Collective: each feature c's k[c]-th smallest present value over all ranks (0-based; k[c]
// below its count), exactly, without moving the values: a radix selection on order_key, one
// byte at a time from the top. Each of the 8 rounds counts, per feature, the values whose keys
// begin with the bytes chosen so far by their next byte (256 counts), all-reduces the counts,
// and keeps the byte in whose count the k-th value falls. Memory: 256 counts per feature (as
// much as 256 rows of the data), whatever the number of rows; the rows are read 8 times.
std::vector<OrderStatistic> select_order_statistics(const LocalData& d, std::vector<std::int64_t> k,
                                                    comm::Communicator& comm) {
  constexpr int kDigit = 8, kBuckets = 1 << kDigit;
  const std::size_t features = d.features;
  std::vector<std::uint64_t> prefix(features, 0);  // the key's bytes chosen so far
  std::vector<std::int64_t> counts(features * kBuckets), tied(features);
  for (int shift = 64 - kDigit; shift >= 0; shift -= kDigit) {
    const std::uint64_t chosen = shift == 64 - kDigit ? 0 : ~std::uint64_t{0} << (shift + kDigit);
    std::fill(counts.begin(), counts.end(), 0);
    for (std::size_t i = 0; i < d.rows; ++i)
      for (std::size_t c = 0; c < features; ++c) {
        const double v = d.x[i * features + c];
        if (std::isnan(v)) continue;
        const std::uint64_t key = order_key(v);
        if ((key & chosen) == prefix[c]) ++counts[c * kBuckets + ((key >> shift) & (kBuckets - 1))];
      }
    comm.allreduce(comm::view(counts));
    for (std::size_t c = 0; c < features; ++c) {
      std::uint64_t b = 0;
      for (; k[c] >= counts[c * kBuckets + b]; ++b) k[c] -= counts[c * kBuckets + b];
      prefix[c] |= b << shift;
      tied[c] = counts[c * kBuckets + b];  // after the last round: the values equal to it
    }
  }
  std::vector<OrderStatistic> out(features);
  for (std::size_t c = 0; c < features; ++c)
    out[c] = {from_order_key(prefix[c]), k[c] + 1 < tied[c]};
  return out;
}

// Collective: each feature's smallest present value above below[c] over all ranks (+inf when
// there is none).
std::vector<double> next_values_above(const LocalData& d, const std::vector<double>& below,
                                      comm::Communicator& comm) {
  std::vector<double> next(d.features, std::numeric_limits<double>::infinity());
  for (std::size_t i = 0; i < d.rows; ++i)
    for (std::size_t c = 0; c < d.features; ++c)
      if (const double v = d.x[i * d.features + c]; v > below[c]) next[c] = std::min(next[c], v);
  comm.allreduce(comm::view(next), {comm::ReduceOp::min});
  return next;
}

// Collective: the median of each feature's present values over all ranks, as np.median (the
// mean of the middle two of an even count); the lower middle value by selection, the upper
// one the same or the next larger value. `counts` are the present values (none 0).
std::vector<double> global_medians(const LocalData& d, const std::vector<std::int64_t>& counts,
                                   comm::Communicator& comm) {
  std::vector<std::int64_t> lower_middle(d.features);
  for (std::size_t c = 0; c < d.features; ++c) lower_middle[c] = (counts[c] - 1) / 2;
  const auto lower = select_order_statistics(d, lower_middle, comm);
  std::vector<double> lower_values(d.features);
  for (std::size_t c = 0; c < d.features; ++c) lower_values[c] = lower[c].value;
  const auto above = next_values_above(d, lower_values, comm);
  std::vector<double> medians(d.features);
  for (std::size_t c = 0; c < d.features; ++c) {
    const double upper = lower[c].next_equal ? lower[c].value : above[c];
    medians[c] = counts[c] % 2 == 1 ? lower[c].value : (lower[c].value + upper) / 2;
  }
  return medians;
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
    const auto counts = present_counts(d, comm);
    for (std::size_t c = 0; c < d.features; ++c)
      if (counts[c] == 0) throw missing_everywhere(c);
    imputer.values = global_medians(d, counts, comm);
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
