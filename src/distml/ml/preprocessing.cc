#include "distml/ml/preprocessing.h"

#include <cmath>
#include <limits>

#include "distml/core/error.h"
#include "distml/ml/agreement.h"

namespace distml::ml {

using comm::Communicator;

void Standardizer::apply(LocalData& d) const {
  if (d.features != mean.size() || scale.size() != mean.size())
    throw DataError(cat("standardizer has ", mean.size(), " features, data has ", d.features));
  for (std::size_t i = 0; i < d.rows; ++i)
    for (std::size_t c = 0; c < d.features; ++c)
      d.x[i * d.features + c] = (d.x[i * d.features + c] - mean[c]) / scale[c];
}

nlohmann::json Standardizer::to_json() const { return {{"mean", mean}, {"scale", scale}}; }

Standardizer Standardizer::from_json(const nlohmann::json& j) {
  Standardizer s;
  try {
    s.mean = j.at("mean").get<std::vector<double>>();
    s.scale = j.at("scale").get<std::vector<double>>();
  } catch (const nlohmann::json::exception& e) {
    throw DataError(cat("standardizer: expected arrays \"mean\" and \"scale\": ", e.what()));
  }
  if (s.mean.size() != s.scale.size())
    throw DataError(cat("standardizer: \"mean\" has ", s.mean.size(), " values, \"scale\" ",
                        s.scale.size(), "; expected equal sizes"));
  for (double v : s.scale)
    if (!(v > 0) || !std::isfinite(v))
      throw DataError(cat("standardizer: scale ", v, " is not a positive finite number"));
  return s;
}

Standardizer fit_standardizer(const LocalData& d, Communicator& comm) {
  const std::size_t f = d.features;
  std::vector<double> sums(f + 1, 0.0);  // per feature, then the row count
  for (std::size_t i = 0; i < d.rows; ++i)
    for (std::size_t c = 0; c < f; ++c) sums[c] += d.x[i * f + c];
  sums[f] = static_cast<double>(d.rows);
  comm.allreduce(comm::view(sums));
  const double n = sums[f];
  if (n == 0) throw DataError("cannot fit a standardizer on 0 rows");
  Standardizer s;
  s.mean.assign(sums.begin(), sums.begin() + static_cast<std::ptrdiff_t>(f));
  for (double& m : s.mean) m /= n;
  std::vector<double> squares(f, 0.0);
  for (std::size_t i = 0; i < d.rows; ++i)
    for (std::size_t c = 0; c < f; ++c) {
      const double dev = d.x[i * f + c] - s.mean[c];
      squares[c] += dev * dev;
    }
  comm.allreduce(comm::view(squares));
  s.scale.resize(f);
  // As scikit-learn's _is_constant_feature: a variance within rounding error of zero.
  constexpr double eps = std::numeric_limits<double>::epsilon();
  for (std::size_t c = 0; c < f; ++c) {
    const double var = squares[c] / n;
    const double bound = n * eps * var + std::pow(n * s.mean[c] * eps, 2);
    s.scale[c] = var <= bound ? 1.0 : std::sqrt(var);
  }
  return s;
}

bool in_test_split(std::uint64_t index, double test_fraction, std::uint64_t seed) {
  // splitmix64 of the seed, then of the index mixed with it.
  const auto mix = [](std::uint64_t z) {
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  };
  const std::uint64_t h = mix(mix(seed) ^ index);
  return static_cast<double>(h >> 11) * 0x1.0p-53 < test_fraction;
}

std::pair<LocalData, LocalData> train_test_split(const LocalData& d, double test_fraction,
                                                 std::uint64_t seed, Communicator& comm) {
  if (!(test_fraction >= 0 && test_fraction <= 1))
    throw ConfigError(cat("test_fraction = ", test_fraction, ": expected a number in [0, 1]"));
  const auto offset =
      static_cast<std::uint64_t>(exclusive_prefix(comm, static_cast<std::int64_t>(d.rows)));
  std::pair<LocalData, LocalData> halves(empty_like(d), empty_like(d));
  for (std::size_t i = 0; i < d.rows; ++i)
    append_row(in_test_split(offset + i, test_fraction, seed) ? halves.second : halves.first, d, i);
  std::vector<std::int64_t> rows = {static_cast<std::int64_t>(halves.first.rows),
                                    static_cast<std::int64_t>(halves.second.rows)};
  comm.allreduce(comm::view(rows));
  halves.first.global_rows = static_cast<std::size_t>(rows[0]);
  halves.second.global_rows = static_cast<std::size_t>(rows[1]);
  return halves;
}

}  // namespace distml::ml
