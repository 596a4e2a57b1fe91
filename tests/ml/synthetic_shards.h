// Seeded synthetic classification data for the estimator tests, and its block split into
// per-rank LocalData shards.
#pragma once

#include <cmath>
#include <cstdint>
#include <mutex>
#include <vector>

#include "distml/comm/block_range.h"
#include "distml/comm/local/local_world.h"
#include "distml/data/permutation.h"
#include "distml/ml/local_data.h"

namespace distml::ml::testing {

/// Gaussian blobs: `classes` centres drawn from N(0, spread^2), rows around them with unit
/// noise (so classes overlap), plus `offset` added to every feature. Row i has class i % classes.
inline LocalData make_blobs(std::size_t rows, std::size_t features, std::int64_t classes,
                            std::uint64_t seed, double spread = 1.5, double offset = 0) {
  data::SplitMix64 rng(seed);
  auto uniform = [&] { return (static_cast<double>(rng.next() >> 11) + 0.5) * 0x1.0p-53; };
  auto normal = [&] {
    return std::sqrt(-2 * std::log(uniform())) * std::cos(6.283185307179586 * uniform());
  };
  std::vector<double> centres(classes * features);
  for (double& c : centres) c = spread * normal();
  LocalData d;
  d.rows = d.global_rows = rows;
  d.features = features;
  d.num_classes = classes;
  d.x.resize(rows * features);
  d.y.resize(rows);
  for (std::size_t i = 0; i < rows; ++i) {
    d.y[i] = static_cast<std::int64_t>(i % classes);
    for (std::size_t j = 0; j < features; ++j)
      d.x[i * features + j] = offset + centres[d.y[i] * features + j] + normal();
  }
  return d;
}

/// Blobs with features rounded to integers (about 50 distinct values each), so that tree models
/// binning them must be the same for every world size.
inline LocalData integer_blobs(std::size_t rows, std::size_t features, std::int64_t classes,
                               std::uint64_t seed, double spread = 1.5) {
  auto d = make_blobs(rows, features, classes, seed, spread);
  for (double& x : d.x) x = std::round(4 * x);
  return d;
}

/// integer_blobs with a smooth real-valued target of the features instead of classes.
inline LocalData integer_regression(std::size_t rows, std::uint64_t seed) {
  auto d = integer_blobs(rows, 4, 2, seed);
  d.y.clear();
  d.num_classes = 0;
  d.targets.resize(rows);
  for (std::size_t i = 0; i < rows; ++i) {
    const double* x = d.row(i);
    d.targets[i] = 0.3 * x[0] - 0.2 * x[1] + 3 * std::sin(x[2] / 4) + 0.1 * std::cos(7.0 * i);
  }
  return d;
}

/// Rank `rank`'s block of `all` when cut into `parts` contiguous row ranges.
inline LocalData shard(const LocalData& all, int parts, int rank) {
  const auto b = comm::block_range(all.rows, parts, rank);
  LocalData d = empty_like(all);
  d.global_rows = all.global_rows;
  for (std::size_t i = b.begin; i < b.end; ++i) append_row(d, all, i);
  return d;
}

/// `dense` as sparse rows: every entry that is not 0 stored.
inline LocalData sparsified(const LocalData& dense) {
  LocalData d = dense;
  d.x.clear();
  SparseRows& s = d.sparse.emplace();
  for (std::size_t i = 0; i < dense.rows; ++i) {
    for (std::size_t j = 0; j < dense.features; ++j)
      if (const double v = dense.row(i)[j]; v != 0) {
        s.columns.push_back(static_cast<std::uint32_t>(j));
        s.values.push_back(v);
      }
    s.row_start.push_back(s.values.size());
  }
  return d;
}

/// Runs fn(comm, shard) on `np` ranks and returns what each rank's fn returned, by rank.
template <class Fn>
auto on_ranks(int np, const LocalData& all, Fn fn) {
  using Result = decltype(fn(std::declval<comm::Communicator&>(), all));
  std::vector<Result> out(np);
  comm::local::run_ranks(
      np, {}, [&](comm::Communicator& c) { out[c.rank()] = fn(c, shard(all, np, c.rank())); });
  return out;
}

}  // namespace distml::ml::testing
