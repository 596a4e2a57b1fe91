#include "distml/ml/kmeans.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <mutex>

#include "distml/comm/block_range.h"
#include "distml/comm/local/local_world.h"
#include "distml/core/error.h"
#include "distml/data/permutation.h"

namespace distml::ml {
namespace {

using comm::Communicator;

// A whole data set, row-major; shards are cut from it with block_range.
struct Table {
  std::size_t rows = 0, features = 0;
  std::vector<double> x;
};

// Gaussian blobs (Box-Muller on SplitMix64): `per_blob` rows around each centre, blob by blob.
Table blobs(const std::vector<std::vector<double>>& centres, std::size_t per_blob, double sigma,
            std::uint64_t seed) {
  data::SplitMix64 rng(seed);
  auto uniform = [&] { return (static_cast<double>(rng.next() >> 11) + 0.5) * 0x1.0p-53; };
  Table t{centres.size() * per_blob, centres[0].size(), {}};
  for (const auto& c : centres)
    for (std::size_t i = 0; i < per_blob; ++i)
      for (double mu : c)
        t.x.push_back(mu +
                      sigma * std::sqrt(-2 * std::log(uniform())) * std::cos(2 * M_PI * uniform()));
  return t;
}

LocalData shard(const Table& t, int ranks, int rank) {
  const auto r = comm::block_range(t.rows, ranks, rank);
  LocalData d;
  d.rows = r.size();
  d.features = t.features;
  d.global_rows = t.rows;
  d.x.assign(t.x.begin() + r.begin * t.features, t.x.begin() + r.end * t.features);
  return d;
}

LocalData whole(const Table& t) { return shard(t, 1, 0); }

// Fits on `ranks` ranks and returns rank 0's model, after checking all ranks agree bitwise.
KMeans fit_on(int ranks, const Table& t, const KMeansOptions& o,
              const std::vector<double>* initial = nullptr) {
  std::vector<KMeans> models(ranks, KMeans(o));
  comm::local::run_ranks(ranks, {}, [&](Communicator& comm) {
    KMeans m(o);
    const LocalData d = shard(t, ranks, comm.rank());
    if (initial)
      m.fit(d, comm, *initial);
    else
      m.fit(d, comm);
    models[comm.rank()] = m;
  });
  for (int r = 1; r < ranks; ++r) {
    EXPECT_EQ(models[r].centroids(), models[0].centroids()) << "rank " << r;
    EXPECT_EQ(models[r].iterations(), models[0].iterations()) << "rank " << r;
  }
  return models[0];
}

// A plain single-process Lloyd with sklearn's stopping rule, as the reference.
std::vector<double> reference_lloyd(const Table& t, std::vector<double> c, double tol,
                                    int max_iter) {
  const std::size_t d = t.features, k = c.size() / d;
  std::vector<double> mean(d, 0), var(d, 0);
  for (std::size_t i = 0; i < t.rows; ++i)
    for (std::size_t j = 0; j < d; ++j) mean[j] += t.x[i * d + j] / t.rows;
  for (std::size_t i = 0; i < t.rows; ++i)
    for (std::size_t j = 0; j < d; ++j) var[j] += std::pow(t.x[i * d + j] - mean[j], 2) / t.rows;
  double scale = 0;
  for (double v : var) scale += v / d;
  std::vector<std::size_t> labels(t.rows, k);
  for (int it = 0; it < max_iter; ++it) {
    std::vector<double> sums(k * d, 0), counts(k, 0);
    bool changed = false;
    for (std::size_t i = 0; i < t.rows; ++i) {
      std::size_t best = 0;
      double best_d = std::numeric_limits<double>::infinity();
      for (std::size_t q = 0; q < k; ++q) {
        double s = 0;
        for (std::size_t j = 0; j < d; ++j) s += std::pow(t.x[i * d + j] - c[q * d + j], 2);
        if (s < best_d) best_d = s, best = q;
      }
      changed |= labels[i] != best;
      labels[i] = best;
      counts[best] += 1;
      for (std::size_t j = 0; j < d; ++j) sums[best * d + j] += t.x[i * d + j];
    }
    double shift = 0;
    for (std::size_t q = 0; q < k; ++q)
      for (std::size_t j = 0; j < d; ++j) {
        const double next = sums[q * d + j] / counts[q];
        shift += std::pow(next - c[q * d + j], 2);
        c[q * d + j] = next;
      }
    if (!changed || shift <= tol * scale) break;
  }
  return c;
}

// Sum over rows of the squared distance to the nearest of `centres`, computed plainly.
double inertia_of(const Table& t, const std::vector<double>& centres) {
  const std::size_t d = t.features;
  double total = 0;
  for (std::size_t i = 0; i < t.rows; ++i) {
    double best = std::numeric_limits<double>::infinity();
    for (std::size_t q = 0; q < centres.size() / d; ++q) {
      double s = 0;
      for (std::size_t j = 0; j < d; ++j) s += std::pow(t.x[i * d + j] - centres[q * d + j], 2);
      best = std::min(best, s);
    }
    total += best;
  }
  return total;
}

// The inertia of the blobs' own empirical means under the generating labels.
double true_inertia(const Table& t, std::size_t blobs_count) {
  const std::size_t d = t.features, per = t.rows / blobs_count;
  double total = 0;
  for (std::size_t b = 0; b < blobs_count; ++b) {
    std::vector<double> mean(d, 0);
    for (std::size_t i = b * per; i < (b + 1) * per; ++i)
      for (std::size_t j = 0; j < d; ++j) mean[j] += t.x[i * d + j] / per;
    for (std::size_t i = b * per; i < (b + 1) * per; ++i)
      for (std::size_t j = 0; j < d; ++j) total += std::pow(t.x[i * d + j] - mean[j], 2);
  }
  return total;
}

void expect_near_all(const std::vector<double>& a, const std::vector<double>& b, double tol) {
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], tol) << "value " << i;
}

const std::vector<std::vector<double>> kFiveBlobs = {
    {0, 0, 0}, {20, 0, 0}, {0, 20, 0}, {0, 0, 20}, {20, 20, 20}};

TEST(KMeans, DistributedLloydMatchesSingleRankReference) {
  // Overlapping blobs, started from three rows of the first blob: many iterations.
  const Table t = blobs({{0, 0, 0, 0}, {3, 1, 0, 2}, {-2, 3, 1, 0}}, 100, 1.5, 11);
  const std::vector<double> initial(t.x.begin(), t.x.begin() + 3 * t.features);
  KMeansOptions o;
  o.k = 3;
  o.tol = 1e-8;
  const auto expected = reference_lloyd(t, initial, o.tol, o.max_iter);
  const KMeans single = fit_on(1, t, o, &initial);
  EXPECT_GT(single.iterations(), 3);
  EXPECT_NEAR(single.fitted_inertia(), inertia_of(t, single.centroids()),
              1e-9 * single.fitted_inertia());
  expect_near_all(single.centroids(), expected, 1e-9);
  for (int ranks : {2, 3, 4}) {
    SCOPED_TRACE(ranks);
    const KMeans m = fit_on(ranks, t, o, &initial);
    expect_near_all(m.centroids(), single.centroids(), 1e-9);
    EXPECT_EQ(m.iterations(), single.iterations());
    EXPECT_NEAR(m.fitted_inertia(), single.fitted_inertia(), 1e-9 * single.fitted_inertia());
  }
}

TEST(KMeans, KMeansParallelFindsWellSeparatedBlobs) {
  const Table t = blobs(kFiveBlobs, 200, 1.0, 3);
  const double truth = true_inertia(t, kFiveBlobs.size());
  KMeansOptions o;
  o.k = 5;
  for (int ranks : {1, 3}) {
    for (std::uint64_t seed : {0, 1, 2}) {
      o.seed = seed;
      const KMeans m = fit_on(ranks, t, o);
      EXPECT_NEAR(m.fitted_inertia(), truth, 1e-6 * truth) << ranks << " ranks, seed " << seed;
    }
  }
}

TEST(KMeans, KMeansPlusPlusFindsBlobsAndIgnoresWorldSize) {
  const Table t = blobs(kFiveBlobs, 200, 1.0, 4);
  KMeansOptions o;
  o.k = 5;
  o.init = "k-means++";
  const KMeans single = fit_on(1, t, o);
  EXPECT_NEAR(single.fitted_inertia(), true_inertia(t, 5), 1e-6 * single.fitted_inertia());
  for (int ranks : {2, 4})
    expect_near_all(fit_on(ranks, t, o).centroids(), single.centroids(), 1e-9);
}

TEST(KMeans, SameSeedAndWorldSizeGiveTheSameModel) {
  const Table t = blobs({{0, 0}, {4, 0}, {0, 4}, {4, 4}}, 150, 1.5, 5);
  for (const char* init : {"k-means||", "k-means++", "random"}) {
    KMeansOptions o;
    o.k = 6;
    o.init = init;
    o.seed = 42;
    const KMeans a = fit_on(3, t, o), b = fit_on(3, t, o);
    EXPECT_EQ(a.centroids(), b.centroids()) << init;
    EXPECT_EQ(a.fitted_inertia(), b.fitted_inertia()) << init;
    o.seed = 43;
    EXPECT_NE(fit_on(3, t, o).centroids(), a.centroids()) << init;
  }
}

TEST(KMeans, BestOfNInitIsNoWorseThanTheFirstRun) {
  const Table t = blobs({{0, 0}, {4, 0}, {0, 4}, {4, 4}}, 150, 1.5, 6);
  KMeansOptions o;
  o.k = 7;
  o.init = "random";
  const double one = fit_on(2, t, o).fitted_inertia();
  o.n_init = 4;
  EXPECT_LE(fit_on(2, t, o).fitted_inertia(), one);
}

TEST(KMeans, RelocatesAnEmptyClusterToTheFarthestRow) {
  // The centre at 1000 attracts no row; 50 is the row farthest from its centre (10), so the
  // empty centre moves there and 10's cluster keeps 10 and 10.1.
  const Table t{6, 1, {0, 0.1, 0.2, 10, 10.1, 50}};
  const std::vector<double> initial = {0.1, 10, 1000};
  KMeansOptions o;
  o.k = 3;
  for (int ranks : {1, 2, 3, 4}) {
    SCOPED_TRACE(ranks);
    const KMeans m = fit_on(ranks, t, o, &initial);
    expect_near_all(m.centroids(), {0.1, 10.05, 50}, 1e-12);
    EXPECT_NEAR(m.fitted_inertia(), 0.02 + 0.005, 1e-12);
  }
}

TEST(KMeans, MinibatchComesCloseToLloydInertia) {
  const Table t = blobs({{0, 0, 0}, {6, 0, 0}, {0, 6, 0}, {0, 0, 6}}, 1000, 1.0, 7);
  KMeansOptions o;
  o.k = 4;
  const double lloyd = fit_on(2, t, o).fitted_inertia();
  o.algorithm = "minibatch";
  o.batch_size = 128;
  o.tol = 0;  // sklearn's MiniBatchKMeans default: stop on the smoothed inertia only
  for (int ranks : {1, 2, 3}) {
    const KMeans m = fit_on(ranks, t, o);
    EXPECT_LT(m.fitted_inertia(), 1.02 * lloyd) << ranks << " ranks";
    EXPECT_GT(m.iterations(), 1);
  }
  // From one noisy row of each blob the centres have to travel about a standard deviation.
  std::vector<double> initial;
  for (std::size_t b = 0; b < 4; ++b)
    initial.insert(initial.end(), t.x.begin() + b * 1000 * 3, t.x.begin() + (b * 1000 + 1) * 3);
  KMeansOptions lloyd_options = o;
  lloyd_options.algorithm = "lloyd";
  const double lloyd_from_rows = fit_on(2, t, lloyd_options, &initial).fitted_inertia();
  EXPECT_GT(inertia_of(t, initial), 1.5 * lloyd_from_rows);
  for (int ranks : {1, 2, 3}) {
    const KMeans m = fit_on(ranks, t, o, &initial);
    EXPECT_LT(m.fitted_inertia(), 1.02 * lloyd_from_rows) << ranks << " ranks";
  }
}

TEST(KMeans, RejectsKAboveTheRowsOnEveryRank) {
  const Table t = blobs({{0, 0}}, 5, 1.0, 8);
  KMeansOptions o;
  o.k = 6;
  std::mutex mutex;
  std::vector<std::string> messages;
  comm::local::run_ranks(2, {}, [&](Communicator& comm) {
    KMeans m(o);
    try {
      m.fit(shard(t, 2, comm.rank()), comm);
    } catch (const ConfigError& e) {
      std::lock_guard lock(mutex);
      messages.push_back(e.what());
    }
  });
  ASSERT_EQ(messages.size(), 2u);
  EXPECT_NE(messages[0].find("k = 6"), std::string::npos) << messages[0];
  EXPECT_NE(messages[0].find("5 rows"), std::string::npos) << messages[0];
}

TEST(KMeans, RejectsBadOptionsAndData) {
  KMeansOptions o;
  o.k = 0;
  EXPECT_THROW(KMeans{o}, ConfigError);
  o.k = 2;
  o.init = "kmeans";
  EXPECT_THROW(KMeans{o}, ConfigError);

  LocalData no_features;
  no_features.rows = 3;
  no_features.global_rows = 3;
  comm::local::run_ranks(1, {}, [&](Communicator& comm) {
    EXPECT_THROW(KMeans().fit(no_features, comm), DataError);
    KMeansOptions given;
    given.k = 1;
    given.init = "given";
    const Table t = blobs({{0, 0}}, 5, 1.0, 9);
    EXPECT_THROW(KMeans(given).fit(whole(t), comm), ConfigError);
    EXPECT_THROW(KMeans(given).fit(whole(t), comm, {1.0}), ConfigError);  // 1 value, not 2
  });
}

TEST(KMeans, SetsOptionsByName) {
  KMeansOptions o;
  set_option(o, "k", "10");
  set_option(o, "init", "k-means++");
  set_option(o, "tol", "1e-6");
  set_option(o, "seed", "18446744073709551615");
  set_option(o, "algorithm", "minibatch");
  set_option(o, "batch_size", "256");
  EXPECT_EQ(o.k, 10);
  EXPECT_EQ(o.init, "k-means++");
  EXPECT_EQ(o.tol, 1e-6);
  EXPECT_EQ(o.seed, 18446744073709551615ull);
  EXPECT_EQ(o.algorithm, "minibatch");
  EXPECT_EQ(o.batch_size, 256u);

  auto message = [&](const std::string& key, const std::string& value) -> std::string {
    KMeansOptions before = o;
    try {
      set_option(o, key, value);
    } catch (const ConfigError& e) {
      EXPECT_EQ(o.k, before.k) << "a failed set_option changes nothing";
      return e.what();
    }
    return "no error";
  };
  EXPECT_NE(message("clusters", "3").find("valid options: k, init"), std::string::npos);
  EXPECT_NE(message("init", "kmeans").find("k-means||, k-means++, random"), std::string::npos);
  EXPECT_NE(message("algorithm", "elkan").find("lloyd, minibatch"), std::string::npos);
  EXPECT_NE(message("k", "0").find("k must be at least 1"), std::string::npos);
  EXPECT_NE(message("k", "ten").find("k: expected an integer"), std::string::npos);
  EXPECT_NE(message("seed", "-1").find("seed"), std::string::npos);
  EXPECT_NE(message("batch_size", "-5").find("got -5"), std::string::npos);
}

TEST(KMeans, WorksWithMoreRanksThanRows) {
  const Table t{3, 2, {0, 0, 0, 1, 9, 9}};
  KMeansOptions o;
  o.k = 2;
  for (const char* algorithm : {"lloyd", "minibatch"}) {
    o.algorithm = algorithm;
    for (const char* init : {"k-means||", "k-means++", "random"}) {
      o.init = init;
      const KMeans m = fit_on(5, t, o);
      // Mini-batch centres are running means of draws with replacement: near, not at, 0.5.
      const double slack = o.algorithm == "lloyd" ? 1e-12 : 0.05;
      EXPECT_NEAR(m.fitted_inertia(), 0.5, slack) << algorithm << " " << init;
    }
  }
  o.algorithm = "lloyd";
  comm::local::run_ranks(5, {}, [&](Communicator& comm) {
    KMeans m(o);
    m.fit(shard(t, 5, comm.rank()), comm);
    EXPECT_NEAR(m.score(shard(t, 5, comm.rank()), comm), -0.5, 1e-12);
  });
}

TEST(KMeans, JsonRoundTripPredictsTheSameLabels) {
  const Table t = blobs(kFiveBlobs, 50, 3.0, 10);
  KMeansOptions o;
  o.k = 5;
  o.seed = 3;
  const KMeans m = fit_on(2, t, o);
  const KMeans back = KMeans::from_json(nlohmann::json::parse(m.to_json().dump()));
  EXPECT_EQ(back.centroids(), m.centroids());
  EXPECT_EQ(back.predict(whole(t)), m.predict(whole(t)));
  EXPECT_EQ(back.options().seed, 3u);
  EXPECT_EQ(back.iterations(), m.iterations());
  EXPECT_EQ(back.fitted_inertia(), m.fitted_inertia());

  nlohmann::json bad = m.to_json();
  bad["centroids"].erase(0);
  EXPECT_THROW(KMeans::from_json(bad), DataError);
  bad = m.to_json();
  bad["estimator"] = "logreg";
  EXPECT_THROW(KMeans::from_json(bad), DataError);
  LocalData other = whole(t);
  other.features = 2;
  other.x.resize(other.rows * 2);
  EXPECT_THROW(back.predict(other), DataError);
}

}  // namespace
}  // namespace distml::ml
