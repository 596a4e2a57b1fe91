// KMeans over row-sharded data, with scikit-learn's semantics where they overlap (KMeans with
// algorithm="lloyd", MiniBatchKMeans): inertia, tol relative to the mean feature variance,
// n_init, empty-cluster relocation, per-centre learning rates. Initialisation: kmeans_init.h.
//
// Lloyd, one iteration, every rank:
//   1. Assign each local row to its nearest centre (kmeans_local.h); accumulate per-centre
//      sums and counts in float64 and count the rows whose label changed.
//   2. All-reduce [sums | counts | changed] in one call; new centre = sum / count.
//   3. Empty centres (count 0) are relocated as in sklearn: each rank offers its e farthest
//      rows from their centres (e = number of empty centres) with their distance, global
//      index, label and values in one allgather; every rank takes the e farthest overall
//      (ties: lowest global index), moves empty centre j to the j-th of them and takes that
//      row out of its old centre's sum and count.
//   4. Stop when no label changed, or when the squared shift of the centres (Frobenius)
//      is at most tol x the mean feature variance (computed collectively once per fit).
// After the loop one more assignment pass gives the inertia of the final centres.
//
// Mini-batch (algorithm = "minibatch"): per step each rank draws its share of
// batch_size x ranks rows (proportional to its rows, with replacement) from a stream seeded
// by (seed, rank, step); sums, counts and batch inertia are all-reduced and centre j moves to
// (c_j W_j + batch sum_j) / (W_j + batch count_j), W_j its count so far. It stops, as
// sklearn, after max_iter passes over the data, on the tol rule above, or when the smoothed
// batch inertia has not improved for max_no_improvement steps.
//
// Agreement: every decision (convergence, relocation, n_init winner) is taken from
// all-reduced or all-gathered values, so ranks stay in step given an all-reduce that gives
// bit-identical results on every rank (the local, ring, tree and halving-doubling
// algorithms do). A given seed and world size always give the same model; k-means|| and
// mini-batch draw per rank, so their results change with the world size (given centres,
// k-means++ and random do not, up to floating-point summation order).
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "distml/comm/communicator.h"
#include "distml/ml/local_data.h"

namespace distml::ml {

class ShardLayout;

struct KMeansOptions {
  int k = 8;
  std::string init = "k-means||";  // | "k-means++" | "random" | "given" (fit with centroids)
  double oversampling = 2.0;       // k-means||: l = oversampling * k rows sampled per round
  int init_rounds = 5;             // k-means|| rounds
  int max_iter = 300;              // Lloyd iterations; mini-batch: passes over the data
  double tol = 1e-4;               // as sklearn: relative to the mean feature variance
  int n_init = 1;                  // runs from different seeds; the lowest inertia wins
  std::uint64_t seed = 0;
  std::string algorithm = "lloyd";  // | "minibatch"
  std::size_t batch_size = 1024;    // minibatch, rows per rank per step
  int max_no_improvement = 10;      // minibatch: steps without a better smoothed inertia
};

/// As JSON, one field per option (model files); fields a file lacks take their defaults.
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(KMeansOptions, k, init, oversampling, init_rounds,
                                                max_iter, tol, n_init, seed, algorithm, batch_size,
                                                max_no_improvement)

/// Sets the option called `key` (the field names above) from text, as `--set k=10` passes
/// it. ConfigError naming the key and the valid keys or values.
void set_option(KMeansOptions& options, const std::string& key, const std::string& value);

/// ConfigError naming the first option out of range (k >= 1, known init and algorithm, ...).
void validate(const KMeansOptions& options);

class KMeans {
 public:
  /// ConfigError when `options` does not validate.
  explicit KMeans(KMeansOptions options = {});

  /// Collective: fits on every rank's shard. ConfigError when k exceeds the global rows or
  /// init is "given"; DataError when there are no features or the shards disagree.
  void fit(const LocalData& data, comm::Communicator& comm);
  /// Collective: one run of the chosen algorithm from `initial_centroids` (k x features,
  /// the same on every rank), whatever options.init and n_init say.
  void fit(const LocalData& data, comm::Communicator& comm,
           const std::vector<double>& initial_centroids);

  /// Nearest centroid of each local row. DataError when the feature count differs.
  std::vector<std::int64_t> predict(const LocalData& data) const;
  /// Collective: the sum over all ranks' rows of the squared distance to the nearest centroid.
  double inertia(const LocalData& data, comm::Communicator& comm) const;
  /// Collective: -inertia, as sklearn's score.
  double score(const LocalData& data, comm::Communicator& comm) const;

  /// {"estimator": "kmeans", "version": 1, "features", "centroids" (k rows), "iterations",
  /// "inertia", "options"}.
  nlohmann::json to_json() const;
  /// DataError naming the field when `j` is not a kmeans model.
  static KMeans from_json(const nlohmann::json& j);

  const KMeansOptions& options() const { return options_; }
  bool fitted() const { return !centroids_.empty(); }
  std::size_t features() const { return features_; }
  /// k x features, row-major.
  const std::vector<double>& centroids() const { return centroids_; }
  /// Lloyd iterations, or mini-batch steps, of the winning run.
  int iterations() const { return iterations_; }
  /// Inertia of the training data at the fitted centroids.
  double fitted_inertia() const { return inertia_; }

 private:
  struct Run {
    std::vector<double> centroids;
    int iterations = 0;
    double inertia = 0;
  };
  Run run_lloyd(const LocalData& data, const ShardLayout& layout, comm::Communicator& comm,
                std::vector<double> centroids, double tol) const;
  Run run_minibatch(const LocalData& data, const ShardLayout& layout, comm::Communicator& comm,
                    std::vector<double> centroids, double tol, std::uint64_t seed) const;
  void keep(Run run, std::size_t features);
  void check_fitted(const char* what) const;

  KMeansOptions options_;
  std::size_t features_ = 0;
  std::vector<double> centroids_;
  int iterations_ = 0;
  double inertia_ = 0;
};

}  // namespace distml::ml
