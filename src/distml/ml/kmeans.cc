#include "distml/ml/kmeans.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <numeric>

#include "distml/core/error.h"
#include "distml/ml/estimator_support.h"
#include "distml/ml/kmeans_init.h"
#include "distml/ml/kmeans_local.h"

namespace distml::ml {
namespace {

constexpr const char* kWho = "kmeans";
constexpr std::uint64_t kRunStream = 101;  // seed of run r of n_init: stream (101, r)

std::uint64_t parse_seed(std::string_view key, std::string_view value) {
  std::uint64_t v = 0;
  const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
  if (ec != std::errc() || end != value.data() + value.size())
    throw ConfigError(cat(key, ": expected a non-negative integer, got \"", value, "\""));
  return v;
}

// Collective: sklearn's tolerance scale, the mean over features of the population variance.
double mean_feature_variance(const LocalData& data, std::size_t global_rows,
                             comm::Communicator& comm) {
  const std::size_t d = data.features;
  std::vector<double> mean(d, 0.0);
  for (std::size_t i = 0; i < data.rows; ++i)
    for (std::size_t j = 0; j < d; ++j) mean[j] += data.row(i)[j];
  allreduce_sum(comm, mean);
  for (double& m : mean) m /= static_cast<double>(global_rows);
  std::vector<double> squares(d, 0.0);
  for (std::size_t i = 0; i < data.rows; ++i)
    for (std::size_t j = 0; j < d; ++j) {
      const double t = data.row(i)[j] - mean[j];
      squares[j] += t * t;
    }
  allreduce_sum(comm, squares);
  return std::accumulate(squares.begin(), squares.end(), 0.0) /
         (static_cast<double>(global_rows) * static_cast<double>(d));
}

// Step 3 of the Lloyd walkthrough in kmeans.h: moves the `empty` centres (whose count is 0)
// to the rows farthest from their centres, updating the per-centre `sums` and `counts`.
void relocate_empty_clusters(const LocalData& data, std::size_t first_global_row,
                             const std::vector<std::int64_t>& labels,
                             const std::vector<double>& dist2,
                             const std::vector<std::size_t>& empty, double* sums, double* counts,
                             comm::Communicator& comm) {
  const std::size_t d = data.features, e = empty.size(), width = 3 + d;
  std::vector<std::size_t> order(data.rows);
  std::iota(order.begin(), order.end(), std::size_t{0});
  auto farther = [&](std::size_t a, std::size_t b) {
    return dist2[a] != dist2[b] ? dist2[a] > dist2[b] : a < b;
  };
  const std::size_t offered = std::min(e, data.rows);
  std::partial_sort(order.begin(), order.begin() + offered, order.end(), farther);
  std::vector<double> mine(e * width, -1.0);  // distance -1: no row offered
  for (std::size_t t = 0; t < offered; ++t) {
    const std::size_t i = order[t];
    double* entry = mine.data() + t * width;
    entry[0] = dist2[i];
    entry[1] = static_cast<double>(first_global_row + i);
    entry[2] = static_cast<double>(labels[i]);
    std::copy(data.row(i), data.row(i) + d, entry + 3);
  }
  std::vector<double> all(mine.size() * comm.size());
  comm.allgather(comm::cview(mine), comm::view(all));

  std::vector<const double*> entries;
  for (std::size_t t = 0; t < all.size(); t += width)
    if (all[t] >= 0) entries.push_back(all.data() + t);
  DML_CHECK(entries.size() >= e, "fewer rows than empty clusters");
  std::partial_sort(
      entries.begin(), entries.begin() + e, entries.end(),
      [](const double* a, const double* b) { return a[0] != b[0] ? a[0] > b[0] : a[1] < b[1]; });
  for (std::size_t t = 0; t < e; ++t) {
    const double* row = entries[t] + 3;
    const auto old = static_cast<std::size_t>(entries[t][2]);
    for (std::size_t j = 0; j < d; ++j) {
      sums[old * d + j] -= row[j];
      sums[empty[t] * d + j] = row[j];
    }
    counts[old] -= 1;
    counts[empty[t]] = 1;
  }
}

}  // namespace

void set_option(KMeansOptions& options, const std::string& key, const std::string& value) {
  KMeansOptions o = options;
  if (key == "k")
    o.k = parse_int_option(key, value);
  else if (key == "init")
    o.init = value;
  else if (key == "oversampling")
    o.oversampling = parse_double_option(key, value);
  else if (key == "init_rounds")
    o.init_rounds = parse_int_option(key, value);
  else if (key == "max_iter")
    o.max_iter = parse_int_option(key, value);
  else if (key == "tol")
    o.tol = parse_double_option(key, value);
  else if (key == "n_init")
    o.n_init = parse_int_option(key, value);
  else if (key == "seed")
    o.seed = parse_seed(key, value);
  else if (key == "algorithm")
    o.algorithm = value;
  else if (key == "batch_size") {
    const int rows = parse_int_option(key, value);
    require_option(rows >= 1, kWho, key, cat("at least 1, got ", rows));
    o.batch_size = static_cast<std::size_t>(rows);
  } else if (key == "max_no_improvement")
    o.max_no_improvement = parse_int_option(key, value);
  else
    throw_unknown_option(kWho, key,
                         {"k", "init", "oversampling", "init_rounds", "max_iter", "tol", "n_init",
                          "seed", "algorithm", "batch_size", "max_no_improvement"});
  validate(o);
  options = o;
}

void validate(const KMeansOptions& o) {
  require_option(o.k >= 1, kWho, "k", cat("at least 1, got ", o.k));
  require_option(
      o.init == "k-means||" || o.init == "k-means++" || o.init == "random" || o.init == "given",
      kWho, "init", cat("one of k-means||, k-means++, random, given; got \"", o.init, "\""));
  require_option(o.oversampling > 0, kWho, "oversampling", cat("positive, got ", o.oversampling));
  require_option(o.init_rounds >= 1, kWho, "init_rounds", cat("at least 1, got ", o.init_rounds));
  require_option(o.max_iter >= 1, kWho, "max_iter", cat("at least 1, got ", o.max_iter));
  require_option(o.tol >= 0, kWho, "tol", cat("non-negative, got ", o.tol));
  require_option(o.n_init >= 1, kWho, "n_init", cat("at least 1, got ", o.n_init));
  require_option(o.algorithm == "lloyd" || o.algorithm == "minibatch", kWho, "algorithm",
                 cat("one of lloyd, minibatch; got \"", o.algorithm, "\""));
  require_option(o.batch_size >= 1, kWho, "batch_size", cat("at least 1, got ", o.batch_size));
  require_option(o.max_no_improvement >= 1, kWho, "max_no_improvement",
                 cat("at least 1, got ", o.max_no_improvement));
}

KMeans::KMeans(KMeansOptions options) : options_(std::move(options)) { validate(options_); }

namespace {

// Collective checks shared by both fit overloads; returns the agreed layout.
ShardLayout check_fit_input(const LocalData& data, const KMeansOptions& o,
                            comm::Communicator& comm) {
  throw_if_any_rank_failed(comm, dense_problem(data, kWho));
  ShardLayout layout = ShardLayout::gather(data, comm);
  if (data.features == 0) throw DataError(cat(kWho, ": the data has no features"));
  if (static_cast<std::size_t>(o.k) > layout.global_rows())
    throw ConfigError(
        cat(kWho, ": k = ", o.k, " is more than the ", layout.global_rows(), " rows of the data"));
  return layout;
}

}  // namespace

void KMeans::fit(const LocalData& data, comm::Communicator& comm) {
  const ShardLayout layout = check_fit_input(data, options_, comm);
  if (options_.init == "given")
    throw ConfigError(cat(kWho, ": init = \"given\" needs fit(data, comm, initial_centroids)"));
  const double tol = options_.tol * mean_feature_variance(data, layout.global_rows(), comm);
  const auto k = static_cast<std::size_t>(options_.k);
  Run best;
  for (int r = 0; r < options_.n_init; ++r) {
    const std::uint64_t seed = data::derive_seed(options_.seed, kRunStream, r);
    std::vector<double> initial;
    if (options_.init == "k-means||")
      initial = init_kmeans_parallel(data, layout, comm, k, options_.oversampling,
                                     options_.init_rounds, seed);
    else if (options_.init == "k-means++")
      initial = init_kmeans_plus_plus(data, layout, comm, k, seed);
    else
      initial = init_random(data, layout, comm, k, seed);
    Run run = options_.algorithm == "lloyd"
                  ? run_lloyd(data, layout, comm, std::move(initial), tol)
                  : run_minibatch(data, layout, comm, std::move(initial), tol, seed);
    if (r == 0 || run.inertia < best.inertia) best = std::move(run);
  }
  keep(std::move(best), data.features);
}

void KMeans::fit(const LocalData& data, comm::Communicator& comm,
                 const std::vector<double>& initial_centroids) {
  const ShardLayout layout = check_fit_input(data, options_, comm);
  const std::size_t expected = static_cast<std::size_t>(options_.k) * data.features;
  if (initial_centroids.size() != expected)
    throw ConfigError(cat(kWho, ": initial centroids hold ", initial_centroids.size(),
                          " values, not k x features = ", expected));
  const double tol = options_.tol * mean_feature_variance(data, layout.global_rows(), comm);
  keep(options_.algorithm == "lloyd" ? run_lloyd(data, layout, comm, initial_centroids, tol)
                                     : run_minibatch(data, layout, comm, initial_centroids, tol,
                                                     data::derive_seed(options_.seed, kRunStream, 0)),
       data.features);
}

void KMeans::keep(Run run, std::size_t features) {
  features_ = features;
  centroids_ = std::move(run.centroids);
  iterations_ = run.iterations;
  inertia_ = run.inertia;
}

KMeans::Run KMeans::run_lloyd(const LocalData& data, const ShardLayout& layout,
                              comm::Communicator& comm, std::vector<double> centroids,
                              double tol) const {
  const std::size_t d = data.features, k = centroids.size() / d, n = data.rows;
  std::vector<std::int64_t> labels(n, -1), fresh(n);
  std::vector<double> dist2(n), reduced(k * d + k + 1), next(k * d);
  Run run;
  for (run.iterations = 1; run.iterations <= options_.max_iter; ++run.iterations) {
    std::fill(reduced.begin(), reduced.end(), 0.0);
    double* sums = reduced.data();
    double* counts = sums + k * d;
    if (n > 0)
      assign_nearest(local_points(data), {centroids.data(), k, d}, fresh.data(), nullptr, sums,
                     counts);
    for (std::size_t i = 0; i < n; ++i)
      if (fresh[i] != labels[i]) reduced.back() += 1;
    labels.swap(fresh);
    comm.allreduce(comm::view(reduced));

    std::vector<std::size_t> empty;
    for (std::size_t c = 0; c < k; ++c)
      if (counts[c] == 0) empty.push_back(c);
    if (!empty.empty()) {
      // Only here are the distances needed (each row's to its centre): an empty cluster takes
      // the farthest rows. Computing them every iteration cost a tenth of Lloyd's time.
      for (std::size_t i = 0; i < n; ++i)
        dist2[i] = squared_distance(data.row(i), centroids.data() + labels[i] * d, d);
      relocate_empty_clusters(data, layout.begin(comm.rank()), labels, dist2, empty, sums, counts,
                              comm);
    }
    double shift = 0;
    for (std::size_t c = 0; c < k; ++c) {
      for (std::size_t j = 0; j < d; ++j) {
        // A centre whose only row moved to an empty one keeps its place.
        next[c * d + j] = counts[c] > 0 ? sums[c * d + j] / counts[c] : centroids[c * d + j];
        const double t = next[c * d + j] - centroids[c * d + j];
        shift += t * t;
      }
    }
    centroids.swap(next);
    if (reduced.back() == 0 || shift <= tol) break;
  }
  run.iterations = std::min(run.iterations, options_.max_iter);
  double total = nearest_distance_sum(local_points(data), {centroids.data(), k, d});
  comm.allreduce(comm::Buffer{&total, 1, comm::DType::f64});
  run.centroids = std::move(centroids);
  run.inertia = total;
  return run;
}

void KMeans::check_fitted(const char* what) const {
  if (!fitted()) throw DataError(cat(kWho, ": ", what, " before fit"));
}

std::vector<std::int64_t> KMeans::predict(const LocalData& data) const {
  check_fitted("predict");
  check_feature_count(data, features_, kWho);
  if (std::string dense = dense_problem(data, kWho); !dense.empty()) throw DataError(dense);
  std::vector<std::int64_t> labels(data.rows);
  std::vector<double> dist2(data.rows);
  if (data.rows > 0)
    assign_nearest(local_points(data),
                   {centroids_.data(), centroids_.size() / features_, features_}, labels.data(),
                   dist2.data());
  return labels;
}

double KMeans::inertia(const LocalData& data, comm::Communicator& comm) const {
  check_fitted("inertia");
  std::string error;
  if (data.features != features_)
    error = cat(kWho, ": the model was fitted on ", features_, " features, the data has ",
                data.features);
  else if (data.x.size() != data.rows * data.features)
    error = cat(kWho, ": x holds ", data.x.size(), " values for ", data.rows, " rows of ",
                data.features, " features");
  throw_if_any_rank_failed(comm, error);
  double total = nearest_distance_sum(
      local_points(data), {centroids_.data(), centroids_.size() / features_, features_});
  comm.allreduce(comm::Buffer{&total, 1, comm::DType::f64});
  return total;
}

double KMeans::score(const LocalData& data, comm::Communicator& comm) const {
  return -inertia(data, comm);
}

nlohmann::json KMeans::to_json() const {
  check_fitted("to_json");
  nlohmann::json rows = nlohmann::json::array();
  for (std::size_t c = 0; c < centroids_.size(); c += features_)
    rows.push_back(std::vector<double>(centroids_.begin() + c, centroids_.begin() + c + features_));
  return {{"estimator", kWho},         {"version", 1},
          {"features", features_},     {"centroids", rows},
          {"iterations", iterations_}, {"inertia", inertia_},
          {"options", options_}};
}

KMeans KMeans::from_json(const nlohmann::json& j) {
  if (model_field(j, "estimator", kWho) != kWho)
    throw DataError(cat("not a kmeans model: estimator is ", j["estimator"].dump()));
  if (model_field(j, "version", kWho) != 1)
    throw DataError(cat("kmeans model: unsupported version ", j["version"].dump()));
  try {
    const auto o = model_options<KMeansOptions>(j, kWho);
    KMeans model(o);
    model.features_ = model_integer<std::size_t>(j, "features", kWho);
    for (const auto& row : model_field(j, "centroids", kWho)) {
      const auto values = row.get<std::vector<double>>();
      if (values.size() != model.features_)
        throw DataError(
            cat("kmeans model: a centroid has ", values.size(), " values, not ", model.features_));
      model.centroids_.insert(model.centroids_.end(), values.begin(), values.end());
    }
    if (model.features_ == 0 || model.centroids_.size() != model.features_ * o.k)
      throw DataError(
          cat("kmeans model: needs k = ", o.k, " centroids of ", model.features_, " > 0 features"));
    model.iterations_ = model_integer<int>(j, "iterations", kWho);
    model.inertia_ = model_field(j, "inertia", kWho).get<double>();
    return model;
  } catch (const nlohmann::json::exception& e) {
    throw DataError(cat("kmeans model: ", e.what()));
  } catch (const ConfigError& e) {
    throw DataError(cat("kmeans model: ", e.what()));
  }
}

}  // namespace distml::ml
