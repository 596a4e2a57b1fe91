// The in-memory pieces of k-means that every rank runs on its own: nearest-centre assignment
// (the hot loop of Lloyd, k-means|| and predict) and the weighted k-means++ and Lloyd used to
// recluster a gathered candidate set. Nothing here communicates; given the same inputs every
// rank computes the same bits.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "distml/data/permutation.h"
#include "distml/ml/local_data.h"

namespace distml::ml {

/// Points or centres: `rows` x `features`, row-major.
struct PointSet {
  const double* x = nullptr;
  std::size_t rows = 0;
  std::size_t features = 0;
  const double* row(std::size_t i) const { return x + i * features; }
};

/// The dense rows of `data` as points.
inline PointSet local_points(const LocalData& data) {
  return {data.x.data(), data.rows, data.features};
}

double squared_distance(const double* a, const double* b, std::size_t features);

/// For each point, the index of the nearest centre (the lowest index on ties) and the exact
/// squared distance to it. The search uses ||c||² - 2 x·c in blocks of rows; the distance
/// written is recomputed as sum (x - c)², so it never goes negative. A point's result depends
/// only on that point and the centres, not on which rank holds it (up to BLAS rounding of the
/// search, which only matters for exact ties). When `sums` (centres.rows x features) and
/// `counts` are given, each point is also added to its centre's sum and count while its block
/// is still in cache: Lloyd's step in one pass over memory. `dist2` may be null (no distances).
void assign_nearest(const PointSet& points, const PointSet& centres, std::int64_t* labels,
                    double* dist2, double* sums = nullptr, double* counts = nullptr);

/// The sum over points of the squared distance to the nearest centre (0 for no points).
double nearest_distance_sum(const PointSet& points, const PointSet& centres);

/// Greedy weighted k-means++ (Arthur & Vassilvitskii 2007, with scikit-learn's
/// 2 + floor(ln k) local trials per centre): the first centre is drawn with probability
/// proportional to weight, each next one proportional to weight x d² to the chosen ones,
/// keeping the trial that lowers the potential most. When the potential is zero (fewer
/// distinct points than k) the remaining centres repeat earlier points. Returns k x features.
std::vector<double> kmeans_plus_plus(const PointSet& points, const std::vector<double>& weights,
                                     std::size_t k, data::SplitMix64& rng);

/// Weighted Lloyd iterations on in-memory points, starting from and updating `centres`
/// (k x features). A centre that attracts no weight stays where it is. Stops when no label
/// changes or after `max_iter` iterations.
void weighted_lloyd(const PointSet& points, const std::vector<double>& weights,
                    std::vector<double>& centres, int max_iter);

}  // namespace distml::ml
