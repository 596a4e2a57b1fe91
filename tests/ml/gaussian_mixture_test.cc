// The Gaussian mixture's world-size independence, model round trip and errors. Its EM steps
// are checked against NumPy in gmm_reference.py.
#include "distml/ml/gaussian_mixture.h"

#include <gtest/gtest.h>

#include <cmath>

#include "distml/core/error.h"
#include "synthetic_shards.h"

namespace distml::ml::gaussian_mixture_test {
namespace {

using testing::on_ranks;

double max_relative_difference(const std::vector<double>& a, const std::vector<double>& b) {
  EXPECT_EQ(a.size(), b.size());
  double largest = 0, scale = 0;
  for (std::size_t i = 0; i < a.size() && i < b.size(); ++i) {
    largest = std::max(largest, std::abs(a[i] - b[i]));
    scale = std::max(scale, std::abs(b[i]));
  }
  return largest / scale;
}

GaussianMixture fit_on(int np, const LocalData& all, const GaussianMixtureOptions& o) {
  return on_ranks(np, all, [&](comm::Communicator& c, const LocalData& d) {
    GaussianMixture m(o);
    m.fit(d, c);
    return m;
  })[0];
}

// k-means++ draws its sample by global row index, so every world size starts from the same
// centres; then the ranks' partial sums are added in another order than one rank's, which moves
// each sufficient statistic by about 1e-16 relative per step. Ten EM steps on separated blobs
// stay far below 1e-9; a rank's rows counted twice or dropped moves the weights by 1e-2.
TEST(GaussianMixture, EveryWorldSizeFitsTheSingleRankModel) {
  const LocalData blobs = testing::make_blobs(120, 3, 3, 4, 3.0);
  for (const char* kind : {"full", "diag", "spherical"}) {
    SCOPED_TRACE(kind);
    GaussianMixtureOptions o;
    o.n_components = 3;
    o.covariance_type = kind;
    o.init_params = "k-means++";
    o.tol = 0;
    o.max_iter = 10;
    const GaussianMixture one = fit_on(1, blobs, o);
    for (int np = 2; np <= 4; ++np) {
      SCOPED_TRACE(np);
      const GaussianMixture m = fit_on(np, blobs, o);
      EXPECT_LE(max_relative_difference(m.weights(), one.weights()), 1e-9);
      EXPECT_LE(max_relative_difference(m.means(), one.means()), 1e-9);
      EXPECT_LE(max_relative_difference(m.covariances(), one.covariances()), 1e-9);
      EXPECT_NEAR(m.lower_bound(), one.lower_bound(), 1e-9 * std::abs(one.lower_bound()));
    }
  }
}

TEST(GaussianMixture, SeparatesBlobsAndRoundTripsThroughJson) {
  const LocalData blobs = testing::make_blobs(150, 2, 3, 9, 20.0);  // far apart
  GaussianMixtureOptions o;
  o.n_components = 3;
  const GaussianMixture m = fit_on(2, blobs, o);
  EXPECT_TRUE(m.converged());
  // Each blob is one component: the labels agree with the classes up to renaming.
  const auto labels = m.predict(blobs);
  std::vector<std::int64_t> component_of(3, -1);
  int agree = 0;
  for (std::size_t i = 0; i < blobs.rows; ++i) {
    auto& c = component_of[static_cast<std::size_t>(blobs.y[i])];
    if (c < 0) c = labels[i];
    agree += c == labels[i] ? 1 : 0;
  }
  EXPECT_EQ(agree, 150);
  const GaussianMixture copy = GaussianMixture::from_json(m.to_json());
  EXPECT_EQ(copy.predict_proba(blobs), m.predict_proba(blobs));
}

TEST(GaussianMixture, BadOptionsAndDegenerateDataAreTypedErrors) {
  GaussianMixtureOptions o;
  EXPECT_THROW(set_option(o, "covariance_type", "tied"), ConfigError);
  EXPECT_THROW(set_option(o, "n_components", "0"), ConfigError);
  EXPECT_THROW(set_option(o, "shape", "1"), ConfigError);
  LocalData same = testing::make_blobs(12, 2, 2, 1);
  for (std::size_t i = 0; i < same.x.size(); ++i) same.x[i] = static_cast<double>(i % 2);
  o.n_components = 20;
  EXPECT_THROW(fit_on(2, same, o), ConfigError);  // more components than rows
  o.n_components = 2;
  o.reg_covar = 0;  // every row is (0, 1): no spread at all
  try {
    fit_on(2, same, o);
    ADD_FAILURE() << "a singular covariance was accepted";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("reg_covar"), std::string::npos) << e.what();
  }
  nlohmann::json broken = fit_on(1, testing::make_blobs(30, 2, 2, 2), {}).to_json();
  broken["means"] = std::vector<double>{1};
  EXPECT_THROW(GaussianMixture::from_json(broken), DataError);
}

}  // namespace
}  // namespace distml::ml::gaussian_mixture_test
