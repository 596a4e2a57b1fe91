// KMeans::run_minibatch: scikit-learn's MiniBatchKMeans step and stopping rule over
// row-sharded data (see the walkthrough in kmeans.h).
#include <algorithm>
#include <cmath>
#include <limits>

#include "distml/data/permutation.h"
#include "distml/ml/kmeans.h"
#include "distml/ml/kmeans_init.h"
#include "distml/ml/kmeans_local.h"

namespace distml::ml {
namespace {

constexpr std::uint64_t kMinibatchStream = 5;  // steps draw from streams (1 + rank, step)

// sklearn's _mini_batch_convergence: an exponentially weighted average of the per-row batch
// inertia, stopping on a small centre shift or when the average stops improving.
class MinibatchConvergence {
 public:
  MinibatchConvergence(double alpha, double tol, int patience)
      : alpha_(std::min(alpha, 1.0)), tol_(tol), patience_(patience) {}

  bool done(int step, double batch_inertia_per_row, double squared_shift) {
    if (step == 0) return false;  // the first batch measures the initial centres
    ewa_ = step == 1 ? batch_inertia_per_row : ewa_ * (1 - alpha_) + batch_inertia_per_row * alpha_;
    if (tol_ > 0 && squared_shift <= tol_) return true;
    if (ewa_ < ewa_min_) {
      ewa_min_ = ewa_;
      no_improvement_ = 0;
    } else {
      ++no_improvement_;
    }
    return no_improvement_ >= patience_;
  }

 private:
  double alpha_, tol_;
  int patience_;
  double ewa_ = 0, ewa_min_ = std::numeric_limits<double>::infinity();
  int no_improvement_ = 0;
};

}  // namespace

KMeans::Run KMeans::run_minibatch(const LocalData& data, const ShardLayout& layout,
                                  comm::Communicator& comm, std::vector<double> centroids,
                                  double tol, std::uint64_t seed) const {
  const std::size_t d = data.features, k = centroids.size() / d, n = data.rows;
  const double global_rows = static_cast<double>(layout.global_rows());
  // This rank's share of the global batch, proportional to its rows so that every row is
  // equally likely to be drawn however unevenly the rows are spread.
  const double global_batch = static_cast<double>(options_.batch_size) * comm.size();
  const auto quota = static_cast<std::size_t>(std::llround(global_batch * n / global_rows));
  const auto steps = std::max<std::int64_t>(
      1, static_cast<std::int64_t>(options_.max_iter * global_rows / global_batch));
  const std::uint64_t stream_seed = data::derive_seed(seed, kMinibatchStream);

  MinibatchConvergence convergence(global_batch * 2 / (global_rows + 1), tol,
                                   options_.max_no_improvement);
  std::vector<double> batch(quota * d), dist2(quota), reduced(k * d + k + 1), weight(k, 0.0);
  std::vector<std::int64_t> labels(quota);
  Run run;
  for (std::int64_t step = 0; step < steps; ++step) {
    data::SplitMix64 rng(data::derive_seed(stream_seed, 1 + comm.rank(), step));
    for (std::size_t b = 0; b < quota; ++b) {
      const double* x = data.row(rng.below(n));
      std::copy(x, x + d, batch.begin() + b * d);
    }
    std::fill(reduced.begin(), reduced.end(), 0.0);
    double* sums = reduced.data();
    double* counts = sums + k * d;
    if (quota > 0) {
      assign_nearest({batch.data(), quota, d}, {centroids.data(), k, d}, labels.data(),
                     dist2.data());
      for (std::size_t b = 0; b < quota; ++b) {
        for (std::size_t j = 0; j < d; ++j) sums[labels[b] * d + j] += batch[b * d + j];
        counts[labels[b]] += 1;
        reduced.back() += dist2[b];
      }
    }
    comm.allreduce(comm::view(reduced));

    double shift = 0, batch_rows = 0;
    for (std::size_t c = 0; c < k; ++c) {
      batch_rows += counts[c];
      if (counts[c] == 0) continue;
      const double total = weight[c] + counts[c];
      for (std::size_t j = 0; j < d; ++j) {
        double& centre = centroids[c * d + j];
        const double moved = (centre * weight[c] + sums[c * d + j]) / total;
        shift += (moved - centre) * (moved - centre);
        centre = moved;
      }
      weight[c] = total;
    }
    run.iterations = static_cast<int>(step + 1);
    if (convergence.done(static_cast<int>(step), reduced.back() / batch_rows, shift)) break;
  }
  double total = nearest_distance_sum({data.x.data(), n, d}, {centroids.data(), k, d});
  comm.allreduce(comm::Buffer{&total, 1, comm::DType::f64});
  run.centroids = std::move(centroids);
  run.inertia = total;
  return run;
}

}  // namespace distml::ml
