#include "distml/ml/kmeans_init.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <unordered_set>

#include "distml/core/error.h"
#include "distml/ml/kmeans_local.h"

namespace distml::ml {
namespace {

// Streams of the seed that do not depend on the rank. Per-rank sampling in k-means|| uses
// streams (1 + rank, 1 + round).
constexpr std::uint64_t kFirstCentreStream = 1;
constexpr std::uint64_t kReclusterStream = 2;
constexpr std::uint64_t kSampleStream = 3;
constexpr std::uint64_t kRandomStream = 4;

// Weighted Lloyd iterations on the k-means|| candidates, as Spark MLlib's LocalKMeans.
constexpr int kReclusterIterations = 30;

// Brings each local row's nearest-candidate distance and index up to date with the
// candidates [first, first + count) of `candidates`.
void update_nearest(const LocalData& data, const std::vector<double>& candidates, std::size_t first,
                    std::size_t count, std::vector<double>& min_dist2,
                    std::vector<std::int64_t>& nearest) {
  if (count == 0 || data.rows == 0) return;
  std::vector<std::int64_t> label(data.rows);
  std::vector<double> dist2(data.rows);
  assign_nearest(local_points(data),
                 {candidates.data() + first * data.features, count, data.features}, label.data(),
                 dist2.data());
  for (std::size_t i = 0; i < data.rows; ++i) {
    if (dist2[i] < min_dist2[i]) {
      min_dist2[i] = dist2[i];
      nearest[i] = static_cast<std::int64_t>(first) + label[i];
    }
  }
}

double allreduce_sum(double value, comm::Communicator& comm) {
  comm.allreduce(comm::Buffer{&value, 1, comm::DType::f64});
  return value;
}

}  // namespace

ShardLayout ShardLayout::gather(const LocalData& data, comm::Communicator& comm) {
  const bool consistent = data.x.size() == data.rows * data.features;
  std::vector<std::int64_t> mine = {static_cast<std::int64_t>(data.rows),
                                    static_cast<std::int64_t>(data.features),
                                    static_cast<std::int64_t>(data.global_rows), consistent};
  std::vector<std::int64_t> all(mine.size() * comm.size());
  comm.allgather(comm::cview(mine), comm::view(all));
  ShardLayout layout;
  layout.offsets_.assign(comm.size() + 1, 0);
  for (int r = 0; r < comm.size(); ++r) {
    const std::int64_t* m = all.data() + r * mine.size();
    if (!m[3])
      throw DataError(cat("rank ", r, " holds ", m[0], " rows of ", m[1],
                          " features but a feature array of another size"));
    if (m[1] != all[1])
      throw DataError(cat("ranks disagree on the number of features: rank 0 has ", all[1],
                          ", rank ", r, " has ", m[1]));
    layout.offsets_[r + 1] = layout.offsets_[r] + static_cast<std::size_t>(m[0]);
  }
  for (int r = 0; r < comm.size(); ++r) {
    const std::int64_t claimed = all[r * mine.size() + 2];
    if (claimed != 0 && static_cast<std::size_t>(claimed) != layout.global_rows())
      throw DataError(cat("rank ", r, " says there are ", claimed,
                          " rows in all, but the ranks hold ", layout.global_rows()));
  }
  return layout;
}

std::vector<double> gather_rows(const LocalData& data, const ShardLayout& layout,
                                const std::vector<std::size_t>& indices, comm::Communicator& comm) {
  const std::size_t d = data.features;
  std::vector<std::size_t> counts(comm.size());
  for (int r = 0; r < comm.size(); ++r) {
    const auto lo = std::lower_bound(indices.begin(), indices.end(), layout.begin(r));
    const auto hi = std::lower_bound(lo, indices.end(), layout.end(r));
    counts[r] = static_cast<std::size_t>(hi - lo) * d;
  }
  std::vector<double> mine;
  mine.reserve(counts[comm.rank()]);
  const std::size_t begin = layout.begin(comm.rank());
  for (auto it = std::lower_bound(indices.begin(), indices.end(), begin);
       it != indices.end() && *it < layout.end(comm.rank()); ++it)
    mine.insert(mine.end(), data.row(*it - begin), data.row(*it - begin) + d);
  std::vector<double> rows(indices.size() * d);
  comm.allgatherv(comm::cview(mine), comm::view(rows), counts);
  return rows;
}

std::vector<std::size_t> sample_indices(std::size_t n, std::size_t count, data::SplitMix64& rng) {
  DML_CHECK_LE(count, n, "sample_indices");
  std::unordered_set<std::size_t> chosen;
  chosen.reserve(count);
  for (std::size_t j = n - count; j < n; ++j) {
    const std::size_t t = rng.below(j + 1);
    chosen.insert(chosen.contains(t) ? j : t);
  }
  std::vector<std::size_t> out(chosen.begin(), chosen.end());
  std::sort(out.begin(), out.end());
  return out;
}

std::size_t plus_plus_sample_size(std::size_t global_rows, std::size_t k) {
  return std::min(global_rows, std::max<std::size_t>(10 * k, 2000));
}

std::vector<double> init_kmeans_parallel(const LocalData& data, const ShardLayout& layout,
                                         comm::Communicator& comm, std::size_t k,
                                         double oversampling, int rounds, std::uint64_t seed) {
  const std::size_t d = data.features, n = data.rows;
  const double l = oversampling * static_cast<double>(k);

  data::SplitMix64 first_rng(data::derive_seed(seed, kFirstCentreStream));
  std::vector<double> candidates =
      gather_rows(data, layout, {first_rng.below(layout.global_rows())}, comm);
  std::vector<double> min_dist2(n, std::numeric_limits<double>::infinity());
  std::vector<std::int64_t> nearest(n, 0);
  update_nearest(data, candidates, 0, 1, min_dist2, nearest);
  double phi = allreduce_sum(std::accumulate(min_dist2.begin(), min_dist2.end(), 0.0), comm);

  std::vector<std::int64_t> counts(comm.size());
  for (int round = 0; round < rounds && phi > 0; ++round) {
    data::SplitMix64 rng(data::derive_seed(seed, 1 + comm.rank(), 1 + round));
    std::vector<double> kept;
    for (std::size_t i = 0; i < n; ++i)
      if (rng.uniform() < l * min_dist2[i] / phi)
        kept.insert(kept.end(), data.row(i), data.row(i) + d);
    const std::int64_t mine = static_cast<std::int64_t>(kept.size());
    comm.allgather(comm::ConstBuffer{&mine, 1, comm::DType::i64}, comm::view(counts));
    std::vector<std::size_t> sizes(counts.begin(), counts.end());
    const std::size_t added = std::accumulate(sizes.begin(), sizes.end(), std::size_t{0});
    if (added == 0) continue;
    const std::size_t first = candidates.size() / d;
    candidates.resize(candidates.size() + added);
    comm.allgatherv(comm::cview(kept),
                    comm::Buffer{candidates.data() + first * d, added, comm::DType::f64}, sizes);
    update_nearest(data, candidates, first, added / d, min_dist2, nearest);
    phi = allreduce_sum(std::accumulate(min_dist2.begin(), min_dist2.end(), 0.0), comm);
  }

  const std::size_t m = candidates.size() / d;
  std::vector<double> weights(m, 0.0);
  for (std::size_t i = 0; i < n; ++i) weights[nearest[i]] += 1;
  comm.allreduce(comm::view(weights));

  data::SplitMix64 rng(data::derive_seed(seed, kReclusterStream));
  const PointSet points{candidates.data(), m, d};
  std::vector<double> centres = kmeans_plus_plus(points, weights, k, rng);
  weighted_lloyd(points, weights, centres, kReclusterIterations);
  return centres;
}

std::vector<double> init_kmeans_plus_plus(const LocalData& data, const ShardLayout& layout,
                                          comm::Communicator& comm, std::size_t k,
                                          std::uint64_t seed) {
  data::SplitMix64 rng(data::derive_seed(seed, kSampleStream));
  const auto indices =
      sample_indices(layout.global_rows(), plus_plus_sample_size(layout.global_rows(), k), rng);
  const std::vector<double> sample = gather_rows(data, layout, indices, comm);
  return kmeans_plus_plus({sample.data(), indices.size(), data.features},
                          std::vector<double>(indices.size(), 1.0), k, rng);
}

std::vector<double> init_random(const LocalData& data, const ShardLayout& layout,
                                comm::Communicator& comm, std::size_t k, std::uint64_t seed) {
  data::SplitMix64 rng(data::derive_seed(seed, kRandomStream));
  return gather_rows(data, layout, sample_indices(layout.global_rows(), k, rng), comm);
}

}  // namespace distml::ml
