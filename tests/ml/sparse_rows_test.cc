// Sparse rows (LocalData::sparse, as LibSVM files are read) against the same rows dense, for the
// estimators that take them, at 1 to 4 ranks.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "distml/core/error.h"
#include "distml/ml/gbdt.h"
#include "distml/ml/kmeans.h"
#include "distml/ml/linear_svc.h"
#include "distml/ml/logistic_regression.h"
#include "distml/ml/naive_bayes.h"
#include "synthetic_shards.h"

namespace distml::ml::sparse_rows_test {
namespace {

using testing::on_ranks;
using testing::sparsified;

constexpr int kWorlds[] = {1, 2, 3, 4};

// Blobs with about 80% of the entries zeroed and the rest made non-negative (counts, as for
// multinomial naive Bayes), so that a dense loop and a sparse one see different work.
LocalData sparse_blobs() {
  LocalData d = testing::make_blobs(90, 30, 3, 11);
  data::SplitMix64 rng(5);
  for (double& v : d.x) v = rng.next() % 5 == 0 ? std::abs(v) : 0.0;
  return d;
}

// Dense and sparse rows give bit-identical sums wherever the estimator loops with
// LocalData::for_each_entry (a skipped entry adds an exact zero), so these models must be
// equal, not close.
TEST(SparseRows, SvmAndNaiveBayesEqualTheirDenseModels) {
  const LocalData dense = sparse_blobs(), sparse = sparsified(dense);
  ASSERT_LT(sparse.stored(), dense.x.size() / 3);
  for (int np : kWorlds) {
    SCOPED_TRACE(np);
    const auto svm = [&](const LocalData& all) {
      return on_ranks(np, all, [](comm::Communicator& c, const LocalData& d) {
        LinearSVC m;
        m.fit(d, c);
        return m.coef();
      })[0];
    };
    EXPECT_EQ(svm(sparse), svm(dense));
    const auto nb = [&](const LocalData& all) {
      return on_ranks(np, all, [](comm::Communicator& c, const LocalData& d) {
        MultinomialNB m;
        m.fit(d, c);
        return m.feature_log_prob();
      })[0];
    };
    EXPECT_EQ(nb(sparse), nb(dense));
  }
}

// GBDT reads an entry that a sparse row does not store as XGBoost reads one in a LibSVM file:
// a missing value, not a 0 (so that its XGBoost export predicts as it does). Sparse rows must
// then give the model of the dense rows with NaN in those places, in fitting and in
// predicting, bit for bit: the same bins, the same exact histogram sums.
TEST(SparseRows, GbdtTakesAnAbsentEntryAsAMissingValue) {
  const LocalData zeros = sparse_blobs(), sparse = sparsified(zeros);
  LocalData missing = zeros;
  for (double& v : missing.x)
    if (v == 0) v = std::numeric_limits<double>::quiet_NaN();
  for (int np : kWorlds) {
    SCOPED_TRACE(np);
    const auto gbdt = [&](const LocalData& all) {
      return on_ranks(np, all, [&](comm::Communicator& c, const LocalData& d) {
        GBDTOptions o;
        o.max_iter = 5;
        GBDT m(o);
        m.fit(d, c);
        return std::pair(m.to_json().dump(), m.decision_function(all));
      })[0];
    };
    const auto [sparse_model, sparse_scores] = gbdt(sparse);
    const auto [missing_model, missing_scores] = gbdt(missing);
    EXPECT_TRUE(sparse_model == missing_model) << "the models differ";
    EXPECT_EQ(sparse_scores, missing_scores);
  }
}

// Logistic regression multiplies dense rows with BLAS, in an order of its own, so the two paths
// agree to rounding: at a random w, each gradient entry g_j = (1/N) sum_i r_i x_ij is a sum of
// N terms with residuals r_i from scores of F terms each. Two summation orders differ by at most
// (N + F) u sum_i |x_ij| (1 + s_i) / N, u = 2^-53, where s_i = sum_j |w_j x_ij| bounds the
// score's rounding (the residual is 1-Lipschitz in it). A dropped or misplaced entry moves g_j
// by about |x_ij| / N, far above that.
TEST(SparseRows, LogisticRegressionGradientEqualsTheDenseOneToRounding) {
  const LocalData dense = sparse_blobs(), sparse = sparsified(dense);
  LogisticRegressionOptions o;
  o.fit_intercept = false;
  const std::size_t f = dense.features, k = 3, n = dense.rows;
  std::vector<double> w(k * f);
  data::SplitMix64 rng(3);
  for (double& v : w) v = static_cast<double>(rng.next() % 2001) / 1000.0 - 1.0;
  for (int np : kWorlds) {
    SCOPED_TRACE(np);
    const auto gradient = [&](const LocalData& all) {
      return on_ranks(np, all, [&](comm::Communicator& c, const LocalData& d) {
        std::vector<double> g;
        LogisticRegression::scaled_objective(d, o, c, w, g);
        return g;
      })[0];
    };
    const auto gs = gradient(sparse), gd = gradient(dense);
    ASSERT_EQ(gs.size(), gd.size());
    const double u = std::ldexp(1.0, -53);
    for (std::size_t m = 0; m < k; ++m)
      for (std::size_t j = 0; j < f; ++j) {
        double bound = 0;
        for (std::size_t i = 0; i < n; ++i) {
          double s = 0;
          for (std::size_t q = 0; q < f; ++q) s += std::abs(w[m * f + q] * dense.row(i)[q]);
          bound += std::abs(dense.row(i)[j]) * (1 + s);
        }
        bound *= static_cast<double>(n + f) * u / static_cast<double>(n);
        EXPECT_LE(std::abs(gs[m * f + j] - gd[m * f + j]), bound) << m << " " << j;
      }
  }
}

// The fitted models: with no intercept the objective F is (1 / (C N))-strongly convex, so each
// solution lies within ||grad F|| C N of the optimum, and the two within the sum of those.
TEST(SparseRows, LogisticRegressionFitsTheDenseModel) {
  const LocalData dense = sparse_blobs(), sparse = sparsified(dense);
  LogisticRegressionOptions o;
  o.fit_intercept = false;
  o.tol = 1e-10;
  const double mu = 1 / (o.C * static_cast<double>(dense.rows));
  for (int np : {1, 3}) {
    SCOPED_TRACE(np);
    const auto fit = [&](const LocalData& all) {
      return on_ranks(np, all, [&](comm::Communicator& c, const LocalData& d) {
        LogisticRegression m(o);
        m.fit(d, c);
        std::vector<double> g;
        LogisticRegression::scaled_objective(d, o, c, m.coef(), g);
        double norm = 0;
        for (double v : g) norm += v * v;
        return std::pair(m.coef(), std::sqrt(norm));
      })[0];
    };
    const auto [ws, gs] = fit(sparse);
    const auto [wd, gd] = fit(dense);
    double distance = 0;
    for (std::size_t p = 0; p < ws.size(); ++p) distance += (ws[p] - wd[p]) * (ws[p] - wd[p]);
    EXPECT_LE(std::sqrt(distance), (gs + gd) / mu);
    EXPECT_LT((gs + gd) / mu, 1e-3);  // the bound says something: both fits converged
  }
}

TEST(SparseRows, DenseOnlyEstimatorsRefuseThemAndDensifiedGivesTheDenseRows) {
  const LocalData dense = sparse_blobs(), sparse = sparsified(dense);
  EXPECT_EQ(densified(sparse, "test").x, dense.x);
  const auto errors = on_ranks(2, sparse, [](comm::Communicator& c, const LocalData& d) {
    std::string messages;
    try {
      GaussianNB().fit(d, c);
    } catch (const DataError& e) {
      messages += e.what();
    }
    try {
      KMeansOptions o;
      o.k = 3;
      KMeans(o).fit(d, c);
    } catch (const DataError& e) {
      messages += e.what();
    }
    return messages;
  });
  for (const auto& e : errors) {
    EXPECT_NE(e.find("gaussian_nb: needs dense rows"), std::string::npos) << e;
    EXPECT_NE(e.find("kmeans: needs dense rows"), std::string::npos) << e;
  }
}

}  // namespace
}  // namespace distml::ml::sparse_rows_test
