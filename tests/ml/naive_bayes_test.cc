#include "distml/ml/naive_bayes.h"

#include <gtest/gtest.h>

#include <cmath>

#include "distml/core/error.h"
#include "synthetic_shards.h"

namespace distml::ml {
namespace {

using testing::make_blobs;
using testing::on_ranks;

void expect_rel_near(const std::vector<double>& a, const std::vector<double>& b, double rel,
                     const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (std::size_t i = 0; i < a.size(); ++i)
    EXPECT_NEAR(a[i], b[i], rel * std::max(1.0, std::abs(b[i]))) << what << " at " << i;
}

// The tiny set of linear_models_test.cc with three classes; scikit-learn 1.2.1 values below.
LocalData tiny() {
  LocalData d;
  d.rows = d.global_rows = 8;
  d.features = 2;
  d.x = {-2.0, 0.5, -1.0, -0.3, -0.5, 1.0, 0.2, -1.1, 0.7, 0.4, 1.5, -0.2, 2.1, 0.9, 0.1, 0.1};
  d.y = {0, 0, 1, 2, 1, 2, 1, 0};
  d.num_classes = 3;
  return d;
}

// Direct single-process GaussianNB: rows of each class gathered, numpy-style mean and var.
struct GaussianReference {
  std::vector<double> theta, var, prior;
  double epsilon = 0;
};
GaussianReference gaussian_reference(const LocalData& d, double var_smoothing) {
  const std::size_t k = d.num_classes, f = d.features;
  GaussianReference r;
  double largest = 0;
  for (std::size_t j = 0; j < f; ++j) {
    double m = 0, v = 0;
    for (std::size_t i = 0; i < d.rows; ++i) m += d.x[i * f + j];
    m /= d.rows;
    for (std::size_t i = 0; i < d.rows; ++i) v += (d.x[i * f + j] - m) * (d.x[i * f + j] - m);
    largest = std::max(largest, v / d.rows);
  }
  r.epsilon = var_smoothing * largest;
  for (std::size_t c = 0; c < k; ++c) {
    std::vector<const double*> rows;
    for (std::size_t i = 0; i < d.rows; ++i)
      if (d.y[i] == static_cast<std::int64_t>(c)) rows.push_back(d.row(i));
    r.prior.push_back(static_cast<double>(rows.size()) / d.rows);
    for (std::size_t j = 0; j < f; ++j) {
      double m = 0, v = 0;
      for (const double* x : rows) m += x[j];
      m /= rows.size();
      for (const double* x : rows) v += (x[j] - m) * (x[j] - m);
      r.theta.push_back(m);
      r.var.push_back(v / rows.size() + r.epsilon);
    }
  }
  return r;
}

TEST(GaussianNB, MatchesScikitLearnOnTinySet) {
  auto m = on_ranks(3, tiny(), [](comm::Communicator& c, const LocalData& s) {
    GaussianNB nb;
    nb.fit(s, c);
    return nb;
  })[0];
  expect_rel_near(m.theta(),
                  {-0.9666666666666667, 0.10000000000000002, 0.7666666666666666, 0.7666666666666666,
                   0.85, -0.65},
                  1e-14, "theta");
  expect_rel_near(m.var(),
                  {0.7355555570928991, 0.10666666820401043, 1.1288888904262326, 0.06888889042623264,
                   0.42250000153734374, 0.2025000015373438},
                  1e-14, "var");
  EXPECT_NEAR(m.epsilon(), 1.5373437500000001e-09, 1e-22);
  expect_rel_near(m.class_prior(), {0.375, 0.375, 0.25}, 1e-15, "prior");
  auto first3 = tiny();
  first3.rows = 3;
  first3.x.resize(6);
  first3.y.resize(3);
  expect_rel_near(m.predict_proba(first3),
                  {9.1879215293724548e-01, 8.1201293390413196e-02, 6.5536723411350492e-06,
                   9.8275525766448479e-01, 1.3602651272188841e-04, 1.7108715822793427e-02,
                   5.5002023226366520e-02, 9.4474526561567884e-01, 2.5271115795456628e-04},
                  1e-12, "proba");
}

// Identical parameters at every world size, equal to the direct computation; a large offset
// checks that the variances keep their digits.
TEST(GaussianNB, DistributedFitEqualsDirectComputation) {
  for (double offset : {0.0, 1e6}) {
    const auto all = make_blobs(157, 4, 3, 31, 1.5, offset);
    const auto ref = gaussian_reference(all, 1e-9);
    std::vector<std::int64_t> first_predictions;
    for (int np = 1; np <= 4; ++np) {
      auto models = on_ranks(np, all, [](comm::Communicator& c, const LocalData& s) {
        GaussianNB nb;
        nb.fit(s, c);
        return nb;
      });
      const std::string what = "np " + std::to_string(np) + " offset " + std::to_string(offset);
      for (const auto& m : models) EXPECT_EQ(m.var(), models[0].var()) << what;
      expect_rel_near(models[0].theta(), ref.theta, 1e-12, what + " theta");
      expect_rel_near(models[0].var(), ref.var, 1e-10, what + " var");
      expect_rel_near(models[0].class_prior(), ref.prior, 1e-15, what + " prior");
      EXPECT_NEAR(models[0].epsilon(), ref.epsilon, 1e-12 * ref.epsilon) << what;
      const auto predictions = models[0].predict(all);
      if (np == 1) first_predictions = predictions;
      EXPECT_EQ(predictions, first_predictions) << what;
    }
  }
}

TEST(GaussianNB, ScoresWellSeparatedBlobs) {
  const auto all = make_blobs(300, 3, 4, 8, 4.0);
  auto scores = on_ranks(4, all, [](comm::Communicator& c, const LocalData& s) {
    GaussianNB nb;
    nb.fit(s, c);
    return nb.score(s, c);
  });
  EXPECT_GT(scores[0], 0.9);
  for (double s : scores) EXPECT_EQ(s, scores[0]);
}

TEST(GaussianNB, JsonRoundTripAndBadOptions) {
  const auto all = make_blobs(60, 3, 3, 2);
  auto m = on_ranks(2, all, [](comm::Communicator& c, const LocalData& s) {
    GaussianNB nb;
    nb.fit(s, c);
    return nb;
  })[0];
  const auto back = GaussianNB::from_json(nlohmann::json::parse(m.to_json().dump()));
  EXPECT_EQ(back.theta(), m.theta());
  EXPECT_EQ(back.var(), m.var());
  EXPECT_EQ(back.predict_proba(all), m.predict_proba(all));
  auto broken = m.to_json();
  broken["var"].erase(0);
  EXPECT_THROW(GaussianNB::from_json(broken), DataError);
  EXPECT_THROW(GaussianNB::from_json({{"estimator", "multinomial_nb"}}), DataError);
  GaussianNBOptions o;
  set_option(o, "var_smoothing", "1e-6");
  EXPECT_EQ(o.var_smoothing, 1e-6);
  EXPECT_THROW(set_option(o, "var_smoothing", "-1"), ConfigError);
  EXPECT_THROW(set_option(o, "priors", "0.5"), ConfigError);
}

LocalData counts(std::size_t rows, std::size_t features, std::int64_t classes, std::uint64_t seed) {
  auto d = make_blobs(rows, features, classes, seed, 2.0);
  for (double& v : d.x) v = std::floor(std::abs(v) * 3);
  return d;
}

TEST(MultinomialNB, MatchesScikitLearnOnTinySet) {
  auto d = tiny();
  for (double& v : d.x) v = std::abs(v) * 3;
  auto m = on_ranks(2, d, [](comm::Communicator& c, const LocalData& s) {
    MultinomialNB nb;
    nb.fit(s, c);
    return nb;
  })[0];
  expect_rel_near(m.feature_log_prob(),
                  {-0.30691343437966845, -1.3307245099650797, -0.5450940806008053,
                   -0.8669941103629277, -0.5896065016191052, -0.8086600676817897},
                  1e-14, "feature_log_prob");
  expect_rel_near(m.class_log_prior(),
                  {-0.9808292530117262, -0.9808292530117262, -1.3862943611198904}, 1e-15,
                  "class_log_prior");
  d.rows = 3;
  d.x.resize(6);
  d.y.resize(3);
  expect_rel_near(m.predict_proba(d),
                  {0.5721609344844824, 0.27476935258616014, 0.15306971292935778,
                   0.45462270541938227, 0.3377423332425819, 0.20763496133803586,
                   0.16946065609618724, 0.4765349234076825, 0.35400442049613023},
                  1e-13, "proba");
}

TEST(MultinomialNB, DistributedFitEqualsDirectComputation) {
  const auto all = counts(181, 6, 4, 13);
  const std::size_t k = 4, f = 6;
  std::vector<double> fc(k * f, 0.0), cc(k, 0.0);
  for (std::size_t i = 0; i < all.rows; ++i) {
    cc[all.y[i]] += 1;
    for (std::size_t j = 0; j < f; ++j) fc[all.y[i] * f + j] += all.x[i * f + j];
  }
  std::vector<double> flp(k * f), clp(k);
  for (std::size_t c = 0; c < k; ++c) {
    double total = 0;
    for (std::size_t j = 0; j < f; ++j) total += fc[c * f + j] + 0.5;
    for (std::size_t j = 0; j < f; ++j) flp[c * f + j] = std::log((fc[c * f + j] + 0.5) / total);
    clp[c] = std::log(cc[c] / all.rows);
  }
  for (int np = 1; np <= 4; ++np) {
    auto models = on_ranks(np, all, [](comm::Communicator& c, const LocalData& s) {
      MultinomialNBOptions o;
      o.alpha = 0.5;
      MultinomialNB nb(o);
      nb.fit(s, c);
      return nb;
    });
    const std::string what = "np " + std::to_string(np);
    for (const auto& m : models) EXPECT_EQ(m.feature_log_prob(), models[0].feature_log_prob());
    EXPECT_EQ(models[0].feature_count(), fc) << what;  // integer counts: exact
    EXPECT_EQ(models[0].class_count(), cc) << what;
    expect_rel_near(models[0].feature_log_prob(), flp, 1e-12, what + " feature_log_prob");
    expect_rel_near(models[0].class_log_prior(), clp, 1e-12, what + " class_log_prior");
  }
}

TEST(MultinomialNB, NegativeFeatureOnOneRankFailsEveryRank) {
  auto all = counts(40, 3, 2, 4);
  all.x[35 * 3 + 1] = -1;  // rank 3 of 4
  std::vector<std::string> errors(4);
  comm::local::run_ranks(4, {}, [&](comm::Communicator& c) {
    try {
      MultinomialNB nb;
      nb.fit(testing::shard(all, 4, c.rank()), c);
    } catch (const DataError& e) {
      errors[c.rank()] = e.what();
    }
  });
  for (const auto& e : errors) {
    EXPECT_NE(e.find("rank 3"), std::string::npos) << e;
    EXPECT_NE(e.find("non-negative"), std::string::npos) << e;
  }
}

TEST(MultinomialNB, UniformPriorJsonRoundTripAndBadOptions) {
  const auto all = counts(80, 4, 3, 6);
  MultinomialNBOptions o;
  set_option(o, "fit_prior", "false");
  set_option(o, "alpha", "0.1");
  auto m = on_ranks(3, all, [&](comm::Communicator& c, const LocalData& s) {
    MultinomialNB nb(o);
    nb.fit(s, c);
    return nb;
  })[0];
  for (double p : m.class_log_prior()) EXPECT_DOUBLE_EQ(p, -std::log(3.0));
  const auto back = MultinomialNB::from_json(nlohmann::json::parse(m.to_json().dump()));
  EXPECT_EQ(back.feature_log_prob(), m.feature_log_prob());
  EXPECT_EQ(back.predict(all), m.predict(all));
  EXPECT_EQ(back.options().alpha, 0.1);
  EXPECT_THROW(MultinomialNB::from_json({{"estimator", "multinomial_nb"}, {"version", 1}}),
               DataError);
  EXPECT_THROW(set_option(o, "alpha", "-0.5"), ConfigError);
  EXPECT_THROW(set_option(o, "alpha", "0"), ConfigError);  // NaN probabilities otherwise
  try {
    set_option(o, "smoothing", "1");
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("alpha, fit_prior"), std::string::npos) << e.what();
  }
  EXPECT_THROW(MultinomialNB().predict(all), DataError);  // not fitted
}

}  // namespace
}  // namespace distml::ml
