#include "distml/ml/kmeans_local.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <mutex>
#include <numeric>

#include "distml/core/error.h"
#include "distml/ml/estimator_support.h"

namespace distml::ml {
namespace {

// Four partial sums: independent chains the CPU can overlap, in a fixed order so the result
// is the same wherever the row lives.
double dot(const double* a, const double* b, std::size_t n) {
  double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  std::size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    s0 += a[i] * b[i];
    s1 += a[i + 1] * b[i + 1];
    s2 += a[i + 2] * b[i + 2];
    s3 += a[i + 3] * b[i + 3];
  }
  for (; i < n; ++i) s0 += a[i] * b[i];
  return (s0 + s1) + (s2 + s3);
}

// Rows per GEMM of assign_nearest: large enough for BLAS to run at speed, small enough that
// the block of rows (128 x 784 doubles for MNIST: 800 KB) stays in cache for the distances
// and sums that follow.
constexpr std::size_t kRowBlock = 128;

}  // namespace

double squared_distance(const double* a, const double* b, std::size_t features) {
  double s = 0;
  for (std::size_t j = 0; j < features; ++j) {
    const double t = a[j] - b[j];
    s += t * t;
  }
  return s;
}

void assign_nearest(const PointSet& points, const PointSet& centres, std::int64_t* labels,
                    double* dist2, double* sums, double* counts) {
  DML_CHECK_EQ(points.features, centres.features, "assign_nearest");
  DML_CHECK(centres.rows > 0, "assign_nearest needs a centre");
  use_one_blas_thread();
  const std::size_t d = points.features, k = centres.rows;
  std::vector<double> centre_norm(k);
  for (std::size_t j = 0; j < k; ++j) centre_norm[j] = dot(centres.row(j), centres.row(j), d);
  // ||x - c||^2 = ||x||^2 - 2 x.c + ||c||^2; the x.c of a block of rows is one GEMM, as
  // centres x rows^T (k x n): with few centres OpenBLAS runs this shape about 1.5 times faster
  // than rows x centres^T (n x k), whose short side it packs poorly.
  std::vector<double> products(kRowBlock * k), best(kRowBlock);
  std::vector<std::int32_t> nearest(kRowBlock);
  for (std::size_t i0 = 0; i0 < points.rows; i0 += kRowBlock) {
    const std::size_t n = std::min(kRowBlock, points.rows - i0);
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(k), static_cast<int>(n),
                static_cast<int>(d), 1.0, centres.x, static_cast<int>(d), points.row(i0),
                static_cast<int>(d), 0.0, products.data(), static_cast<int>(n));
    // The smallest ||c||^2 - 2 x.c of each row, then the lowest centre that attains it: two
    // passes centre by centre over contiguous rows, both branch-free, so both vectorise (one
    // pass with a running argmin per row is a chain of compares and branches: 20% slower with
    // 64 centres). Both passes compute the value alike, c - (p + p): no product that a compiler
    // could fuse into an FMA in one loop and not the other, so the second finds the first's
    // minimum bit for bit.
    double* b = best.data();
    std::int32_t* near = nearest.data();
    std::fill_n(b, n, std::numeric_limits<double>::infinity());
    std::fill_n(near, n, 0);
    for (std::size_t j = 0; j < k; ++j) {
      const double* p = products.data() + j * n;
      for (std::size_t i = 0; i < n; ++i) b[i] = std::min(b[i], centre_norm[j] - (p[i] + p[i]));
    }
    for (std::size_t j = k; j-- > 0;) {
      const double* p = products.data() + j * n;
      const auto c = static_cast<std::int32_t>(j);
      for (std::size_t i = 0; i < n; ++i)
        near[i] = centre_norm[j] - (p[i] + p[i]) == b[i] ? c : near[i];
    }
    for (std::size_t i = 0; i < n; ++i) {
      const std::int64_t label = labels[i0 + i] = near[i];
      const double* x = points.row(i0 + i);
      if (dist2) dist2[i0 + i] = squared_distance(x, centres.row(label), d);
      if (!sums) continue;
      double* sum = sums + label * d;
      for (std::size_t f = 0; f < d; ++f) sum[f] += x[f];
      counts[label] += 1;
    }
  }
}

double nearest_distance_sum(const PointSet& points, const PointSet& centres) {
  std::vector<std::int64_t> labels(points.rows);
  std::vector<double> dist2(points.rows);
  assign_nearest(points, centres, labels.data(), dist2.data());
  double total = 0;
  for (double v : dist2) total += v;
  return total;
}

std::vector<double> kmeans_plus_plus(const PointSet& points, const std::vector<double>& weights,
                                     std::size_t k, data::SplitMix64& rng) {
  const std::size_t n = points.rows, d = points.features;
  DML_CHECK(n > 0 && k > 0, "kmeans_plus_plus on ", n, " points for k = ", k);
  DML_CHECK_EQ(weights.size(), n, "kmeans_plus_plus weights");
  std::vector<double> centres;
  centres.reserve(k * d);
  auto add_centre = [&](std::size_t i) {
    centres.insert(centres.end(), points.row(i), points.row(i) + d);
  };
  // The index whose cumulative mass first exceeds `target` (clamped to the last point).
  std::vector<double> cumulative(n);
  auto draw = [&](const std::vector<double>& mass) {
    double total = 0;
    for (std::size_t i = 0; i < n; ++i) cumulative[i] = total += mass[i];
    const double target = rng.uniform() * total;
    const auto it = std::upper_bound(cumulative.begin(), cumulative.end(), target);
    return std::min<std::size_t>(it - cumulative.begin(), n - 1);
  };

  const std::size_t first = draw(weights);
  add_centre(first);
  std::vector<double> closest(n), mass(n), trial_closest(n), best_closest(n);
  double potential = 0;
  for (std::size_t i = 0; i < n; ++i) {
    closest[i] = squared_distance(points.row(i), points.row(first), d);
    potential += weights[i] * closest[i];
  }
  const int trials = 2 + static_cast<int>(std::log(static_cast<double>(k)));
  for (std::size_t c = 1; c < k; ++c) {
    if (!(potential > 0)) {  // every point sits on a centre: nothing left to spread out to
      add_centre(c % n);
      continue;
    }
    for (std::size_t i = 0; i < n; ++i) mass[i] = weights[i] * closest[i];
    double best_potential = std::numeric_limits<double>::infinity();
    std::size_t best = 0;
    for (int t = 0; t < trials; ++t) {
      const std::size_t candidate = draw(mass);
      double pot = 0;
      for (std::size_t i = 0; i < n; ++i) {
        trial_closest[i] =
            std::min(closest[i], squared_distance(points.row(i), points.row(candidate), d));
        pot += weights[i] * trial_closest[i];
      }
      if (pot < best_potential) {
        best_potential = pot;
        best = candidate;
        best_closest.swap(trial_closest);
      }
    }
    add_centre(best);
    closest.swap(best_closest);
    potential = best_potential;
  }
  return centres;
}

void weighted_lloyd(const PointSet& points, const std::vector<double>& weights,
                    std::vector<double>& centres, int max_iter) {
  const std::size_t n = points.rows, d = points.features, k = centres.size() / d;
  std::vector<std::int64_t> labels(n, -1), previous(n);
  std::vector<double> dist2(n), sums(k * d), totals(k);
  for (int it = 0; it < max_iter; ++it) {
    previous.swap(labels);
    assign_nearest(points, {centres.data(), k, d}, labels.data(), dist2.data());
    if (labels == previous) return;
    std::fill(sums.begin(), sums.end(), 0.0);
    std::fill(totals.begin(), totals.end(), 0.0);
    for (std::size_t i = 0; i < n; ++i) {
      double* s = sums.data() + labels[i] * d;
      for (std::size_t j = 0; j < d; ++j) s[j] += weights[i] * points.row(i)[j];
      totals[labels[i]] += weights[i];
    }
    for (std::size_t c = 0; c < k; ++c) {
      if (!(totals[c] > 0)) continue;
      for (std::size_t j = 0; j < d; ++j) centres[c * d + j] = sums[c * d + j] / totals[c];
    }
  }
}

}  // namespace distml::ml
