#include <gtest/gtest.h>

#include <cmath>

#include "distml/core/error.h"
#include "distml/ml/linear_svc.h"
#include "distml/ml/logistic_regression.h"
#include "synthetic_shards.h"

namespace distml::ml {
namespace {

using testing::make_blobs;
using testing::on_ranks;

// A tiny set whose scikit-learn 1.2.1 fits (tol=1e-12) are written below. sklearn stops on its
// ftol with gradients near 1e-7, hence the 1e-5 tolerance; the exact optimum (scipy, gradient
// 1e-11) agrees with our fits to 1e-9.
LocalData tiny(bool multiclass) {
  LocalData d;
  d.rows = d.global_rows = 8;
  d.features = 2;
  d.x = {-2.0, 0.5, -1.0, -0.3, -0.5, 1.0, 0.2, -1.1, 0.7, 0.4, 1.5, -0.2, 2.1, 0.9, 0.1, 0.1};
  d.y = multiclass ? std::vector<std::int64_t>{0, 0, 1, 2, 1, 2, 1, 0}
                   : std::vector<std::int64_t>{0, 0, 1, 0, 1, 1, 1, 0};
  d.num_classes = multiclass ? 3 : 2;
  return d;
}

LogisticRegressionOptions tight(double C = 1.0) {
  LogisticRegressionOptions o;
  o.C = C;
  o.tol = 1e-10;
  o.max_iter = 1000;
  return o;
}

void expect_all_near(const std::vector<double>& a, const std::vector<double>& b, double tol) {
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], tol) << "at " << i;
}

double fit_objective_single(const LocalData& d, const LogisticRegressionOptions& o,
                            const std::vector<double>& w, std::vector<double>& g) {
  double f = 0;
  comm::local::run_ranks(1, {}, [&](comm::Communicator& c) {
    f = LogisticRegression::scaled_objective(d, o, c, w, g);
  });
  return f;
}

TEST(LogisticRegression, GradientMatchesFiniteDifferences) {
  for (std::int64_t classes : {2, 3}) {
    const auto d = make_blobs(40, 3, classes, 7);
    const auto o = tight(0.7);
    const std::size_t outputs = classes == 2 ? 1 : classes;
    std::vector<double> w(outputs * 4);
    for (std::size_t p = 0; p < w.size(); ++p) w[p] = 0.3 * std::sin(1.0 + p);
    std::vector<double> g, unused;
    fit_objective_single(d, o, w, g);
    for (std::size_t p = 0; p < w.size(); ++p) {
      const double h = 1e-6;
      auto wp = w, wm = w;
      wp[p] += h;
      wm[p] -= h;
      const double fd =
          (fit_objective_single(d, o, wp, unused) - fit_objective_single(d, o, wm, unused)) /
          (2 * h);
      EXPECT_NEAR(g[p], fd, 1e-8) << "classes " << classes << " parameter " << p;
    }
  }
}

// By hand: at w = 0 every row has p = 1/2 and loss log 2; the coefficient gradient is
// mean((p - y) x) = mean(0.5*-2 + 0.5*-1 - 0.5*1 - 0.5*2) = -0.75, the intercept's 0.
TEST(LogisticRegression, ObjectiveAtZeroIsHandChecked) {
  LocalData d;
  d.rows = d.global_rows = 4;
  d.features = 1;
  d.x = {-2, -1, 1, 2};
  d.y = {0, 0, 1, 1};
  d.num_classes = 2;
  std::vector<double> g;
  const double f = fit_objective_single(d, tight(), {0.0, 0.0}, g);
  EXPECT_NEAR(f, std::log(2.0), 1e-15);
  EXPECT_NEAR(g[0], -0.75, 1e-15);
  EXPECT_NEAR(g[1], 0.0, 1e-15);
}

TEST(LogisticRegression, BinaryMatchesScikitLearn) {
  const auto d = tiny(false);
  auto m = on_ranks(1, d, [](comm::Communicator& c, const LocalData& s) {
    LogisticRegression lr(tight(1.0));
    lr.fit(s, c);
    return lr;
  })[0];
  EXPECT_TRUE(m.converged());
  expect_all_near(m.coef(), {0.9439671813698507, 0.840649154733194}, 1e-5);
  expect_all_near(m.intercept(), {-0.22188166958827651}, 1e-5);
  expect_all_near(m.coef(), {0.94396706, 0.84065036}, 1e-8);  // scipy, gradient 1e-11
}

TEST(LogisticRegression, MultinomialMatchesScikitLearn) {
  const auto d = tiny(true);
  auto m = on_ranks(2, d, [](comm::Communicator& c, const LocalData& s) {
    LogisticRegression lr(tight(0.3));
    lr.fit(s, c);
    return lr;
  })[0];
  expect_all_near(m.coef(),
                  {-0.46107130532400104, -0.0356528506885666, 0.2214334776908452, 0.411829371030555,
                   0.239637827633156, -0.3761765203419884},
                  1e-5);
  expect_all_near(m.intercept(), {0.1684600980134892, 0.06398356295684818, -0.23244366097033686},
                  1e-5);
}

// The same fit at every world size: same objective (1e-8 relative), same predictions, and
// every rank of one world holds bit-identical weights.
TEST(LogisticRegression, DistributedFitEqualsSingleRank) {
  for (std::int64_t classes : {2, 4}) {
    const auto all = make_blobs(203, 5, classes, 11 + classes);
    std::vector<double> objectives;
    std::vector<std::vector<std::int64_t>> predictions;
    for (int np = 1; np <= 4; ++np) {
      auto models = on_ranks(np, all, [](comm::Communicator& c, const LocalData& s) {
        LogisticRegression lr(tight());
        lr.fit(s, c);
        return lr;
      });
      for (const auto& m : models) {
        EXPECT_EQ(m.coef(), models[0].coef()) << "np " << np;
        EXPECT_EQ(m.intercept(), models[0].intercept()) << "np " << np;
      }
      EXPECT_TRUE(models[0].converged()) << models[0].n_iter();
      objectives.push_back(models[0].objective());
      predictions.push_back(models[0].predict(all));
    }
    for (int np = 2; np <= 4; ++np) {
      EXPECT_NEAR(objectives[np - 1], objectives[0], 1e-8 * std::abs(objectives[0]))
          << "classes " << classes << " np " << np;
      EXPECT_EQ(predictions[np - 1], predictions[0]) << "classes " << classes << " np " << np;
    }
  }
}

LogisticRegressionOptions tight_l1(double C = 1.0) {
  auto o = tight(C);
  o.penalty = "l1";
  return o;
}

// scikit-learn 1.2.1 saga (tol=1e-14) on the tiny set agrees to 1e-9 with the exact optimum
// (scipy L-BFGS-B on w = u - v, u, v >= 0), written below; the zeros are exact in both. We stop
// on ftol, as for L2, with pseudo-gradients near 1e-8, hence the 1e-6 tolerance.
TEST(LogisticRegression, L1MatchesScikitLearn) {
  auto binary = on_ranks(2, tiny(false), [](comm::Communicator& c, const LocalData& s) {
    LogisticRegression lr(tight_l1(0.5));
    lr.fit(s, c);
    return lr;
  })[0];
  EXPECT_TRUE(binary.converged());
  expect_all_near(binary.coef(), {0.42675300878223554, 0.0}, 1e-6);
  EXPECT_EQ(binary.coef()[1], 0.0);
  expect_all_near(binary.intercept(), {-0.059564208549472336}, 1e-6);
  EXPECT_NEAR(binary.objective(), 2.6424672902098494, 1e-12);

  auto multi = on_ranks(3, tiny(true), [](comm::Communicator& c, const LocalData& s) {
    LogisticRegression lr(tight_l1(1.0));
    lr.fit(s, c);
    return lr;
  })[0];
  EXPECT_TRUE(multi.converged());
  expect_all_near(multi.coef(),
                  {-1.0149593062020736, 0.0, 0.0, 1.0609928785976976, 0.0, -0.4443330055183206},
                  1e-6);
  for (int p : {1, 2, 4}) EXPECT_EQ(multi.coef()[p], 0.0) << "at " << p;
  expect_all_near(multi.intercept(),
                  {0.20875860512069594, -0.02378369245957407, -0.1849749126611226}, 1e-6);
  EXPECT_NEAR(multi.objective(), 7.098539771527841, 1e-12);
}

// As DistributedFitEqualsSingleRank, with penalty l1 (OWL-QN).
TEST(LogisticRegression, L1DistributedFitEqualsSingleRank) {
  for (std::int64_t classes : {2, 4}) {
    const auto all = make_blobs(203, 5, classes, 31 + classes);
    std::vector<double> objectives;
    for (int np = 1; np <= 4; ++np) {
      auto models = on_ranks(np, all, [](comm::Communicator& c, const LocalData& s) {
        LogisticRegression lr(tight_l1(0.05));
        lr.fit(s, c);
        return lr;
      });
      for (const auto& m : models) {
        EXPECT_EQ(m.coef(), models[0].coef()) << "np " << np;
        EXPECT_EQ(m.intercept(), models[0].intercept()) << "np " << np;
      }
      EXPECT_TRUE(models[0].converged()) << models[0].n_iter();
      objectives.push_back(models[0].objective());
    }
    for (int np = 2; np <= 4; ++np)
      EXPECT_NEAR(objectives[np - 1], objectives[0], 1e-8 * std::abs(objectives[0]))
          << "classes " << classes << " np " << np;
  }
}

// With a small C, L1 sets coefficients to exactly 0, and the fit is optimal: |dloss/dw_j| <=
// 1/(C N) where w_j = 0, dloss/dw_j = -sign(w_j)/(C N) elsewhere (to 1e-6: the fit stops on
// ftol with pseudo-gradients near 1e-7).
TEST(LogisticRegression, L1WithSmallCGivesExactZeros) {
  const auto all = make_blobs(300, 8, 3, 17, 0.6);
  const auto o = tight_l1(0.03);
  auto m = on_ranks(2, all, [&](comm::Communicator& c, const LocalData& s) {
    LogisticRegression lr(o);
    lr.fit(s, c);
    return lr;
  })[0];
  EXPECT_TRUE(m.converged());
  std::vector<double> w, g;
  int zeros = 0;
  for (std::size_t k = 0; k < m.outputs(); ++k) {
    for (std::size_t j = 0; j < m.features(); ++j) w.push_back(m.coef()[k * m.features() + j]);
    w.push_back(m.intercept()[k]);
  }
  fit_objective_single(all, o, w, g);
  const double l1 = 1 / (o.C * 300);
  for (std::size_t p = 0; p < w.size(); ++p) {
    if (p % (m.features() + 1) == m.features()) {
      EXPECT_NEAR(g[p], 0.0, 1e-6) << "intercept " << p;
    } else if (w[p] == 0) {
      ++zeros;
      EXPECT_LE(std::abs(g[p]), l1 + 1e-6) << "at " << p;
    } else {
      EXPECT_NEAR(g[p], -std::copysign(l1, w[p]), 1e-6) << "at " << p;
    }
  }
  EXPECT_GE(zeros, 4);
  EXPECT_LT(zeros, 24);
}

TEST(LogisticRegression, ScoreAndProbabilitiesAreConsistent) {
  const auto all = make_blobs(300, 4, 3, 5, 3.0);
  auto scores = on_ranks(3, all, [&](comm::Communicator& c, const LocalData& s) {
    LogisticRegression lr;
    lr.fit(s, c);
    const auto p = lr.predict_proba(s);
    const auto y = lr.predict(s);
    for (std::size_t i = 0; i < s.rows; ++i) {
      double sum = 0;
      for (int k = 0; k < 3; ++k) sum += p[i * 3 + k];
      EXPECT_NEAR(sum, 1.0, 1e-12);
      EXPECT_EQ(y[i], std::max_element(&p[i * 3], &p[i * 3] + 3) - &p[i * 3]);
    }
    return lr.score(s, c);
  });
  EXPECT_GT(scores[0], 0.9);
  for (double s : scores) EXPECT_EQ(s, scores[0]);
}

TEST(LogisticRegression, SgdSolverApproachesTheLbfgsOptimum) {
  const auto all = make_blobs(400, 3, 3, 21, 1.0);
  auto exact = on_ranks(1, all, [](comm::Communicator& c, const LocalData& s) {
    LogisticRegression lr(tight(0.1));
    lr.fit(s, c);
    return lr;
  })[0];
  auto sgd = on_ranks(4, all, [](comm::Communicator& c, const LocalData& s) {
    auto o = tight(0.1);
    o.solver = "sgd";
    o.epochs = 50;
    o.batch_size = 4;
    o.learning_rate = 0.5;
    LogisticRegression lr(o);
    lr.fit(s, c);
    return lr;
  });
  for (const auto& m : sgd) EXPECT_EQ(m.coef(), sgd[0].coef());
  EXPECT_EQ(sgd[0].n_iter(), 50);
  EXPECT_LT(sgd[0].objective(), exact.objective() * 1.01);
  EXPECT_GE(sgd[0].objective(), exact.objective() * (1 - 1e-9));
}

TEST(LogisticRegression, JsonRoundTripKeepsPredictions) {
  const auto all = make_blobs(120, 3, 3, 9);
  auto m = on_ranks(2, all, [](comm::Communicator& c, const LocalData& s) {
    LogisticRegression lr;
    lr.fit(s, c);
    return lr;
  })[0];
  const auto back = LogisticRegression::from_json(nlohmann::json::parse(m.to_json().dump()));
  EXPECT_EQ(back.coef(), m.coef());
  EXPECT_EQ(back.intercept(), m.intercept());
  EXPECT_EQ(back.predict_proba(all), m.predict_proba(all));
  EXPECT_EQ(back.options().C, m.options().C);
  EXPECT_EQ(back.options().penalty, "l2");
  auto broken = m.to_json();
  broken["coef"].erase(0);
  EXPECT_THROW(LogisticRegression::from_json(broken), DataError);
  EXPECT_THROW(LogisticRegression::from_json({{"estimator", "kmeans"}}), DataError);
  EXPECT_THROW(LogisticRegression().predict(all), DataError);  // not fitted
}

TEST(LogisticRegression, JsonKeepsPenaltyAndOlderModelsLoadAsL2) {
  const auto all = make_blobs(120, 3, 2, 9);
  auto m = on_ranks(2, all, [](comm::Communicator& c, const LocalData& s) {
    LogisticRegression lr(tight_l1(0.1));
    lr.fit(s, c);
    return lr;
  })[0];
  auto j = nlohmann::json::parse(m.to_json().dump());
  const auto back = LogisticRegression::from_json(j);
  EXPECT_EQ(back.options().penalty, "l1");
  EXPECT_EQ(back.coef(), m.coef());
  EXPECT_EQ(back.objective(), m.objective());
  j["options"].erase("penalty");  // as written before there was a choice
  EXPECT_EQ(LogisticRegression::from_json(j).options().penalty, "l2");
}

TEST(LogisticRegression, BadOptionsAreConfigErrors) {
  LogisticRegressionOptions o;
  set_option(o, "C", "0.25");
  set_option(o, "solver", "sgd");
  set_option(o, "fit_intercept", "false");
  EXPECT_EQ(o.C, 0.25);
  EXPECT_EQ(o.solver, "sgd");
  EXPECT_FALSE(o.fit_intercept);
  try {
    set_option(o, "l1_ratio", "0.5");
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("l1_ratio"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("penalty"), std::string::npos);  // among the valid
  }
  try {  // OWL-QN is the only L1 solver
    set_option(o, "penalty", "l1");
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("penalty \"l1\" needs solver \"lbfgs\""),
              std::string::npos)
        << e.what();
  }
  LogisticRegressionOptions sgd_l1;
  sgd_l1.penalty = "l1";
  sgd_l1.solver = "sgd";
  EXPECT_THROW(LogisticRegression{sgd_l1}, ConfigError);
  LogisticRegressionOptions l1;
  set_option(l1, "penalty", "l1");
  EXPECT_EQ(l1.penalty, "l1");
  EXPECT_THROW(set_option(l1, "solver", "sgd"), ConfigError);
  EXPECT_THROW(set_option(l1, "penalty", "elasticnet"), ConfigError);
  EXPECT_THROW(set_option(o, "C", "-1"), ConfigError);
  EXPECT_THROW(set_option(o, "C", "abc"), ConfigError);
  EXPECT_THROW(set_option(o, "solver", "newton"), ConfigError);
  EXPECT_THROW(set_option(o, "max_iter", "1.5"), ConfigError);
  LogisticRegressionOptions bad;
  bad.C = 0;
  EXPECT_THROW(LogisticRegression{bad}, ConfigError);
}

TEST(LogisticRegression, BadLabelOnOneRankFailsEveryRank) {
  auto all = make_blobs(30, 2, 2, 3);
  all.y[25] = 5;  // on rank 2 of 3
  std::vector<std::string> errors(3);
  comm::local::run_ranks(3, {}, [&](comm::Communicator& c) {
    try {
      LogisticRegression lr;
      lr.fit(testing::shard(all, 3, c.rank()), c);
    } catch (const DataError& e) {
      errors[c.rank()] = e.what();
    }
  });
  for (const auto& e : errors) {
    EXPECT_NE(e.find("rank 2"), std::string::npos) << e;
    EXPECT_NE(e.find("class id 5"), std::string::npos) << e;
  }
}

TEST(LogisticRegression, ShardsThatDisagreeAreDataErrors) {
  auto all = make_blobs(30, 2, 2, 3);
  all.global_rows = 31;
  auto run = [&] {
    comm::local::run_ranks(2, {}, [&](comm::Communicator& c) {
      LogisticRegression lr;
      lr.fit(testing::shard(all, 2, c.rank()), c);
    });
  };
  EXPECT_THROW(run(), DataError);
  all.global_rows = 30;
  all.num_classes = 1;
  EXPECT_THROW(run(), DataError);
}

LinearSVCOptions tight_svc(double C = 1.0) {
  LinearSVCOptions o;
  o.C = C;
  o.tol = 1e-10;
  return o;
}

// liblinear (sklearn 1.2.1 LinearSVC, tol=1e-9) on the tiny set: dual coordinate descent on
// the same objective, so the optimum is the same.
TEST(LinearSVC, SquaredHingeMatchesLiblinear) {
  for (bool multiclass : {false, true}) {
    auto m = on_ranks(2, tiny(multiclass), [](comm::Communicator& c, const LocalData& s) {
      LinearSVC svc(tight_svc());
      svc.fit(s, c);
      return svc;
    })[0];
    EXPECT_TRUE(m.converged());
    if (!multiclass) {
      expect_all_near(m.coef(), {0.6618663409334339, 0.9193480985772219}, 1e-7);
      expect_all_near(m.intercept(), {-0.09900671836532977}, 1e-7);
    } else {
      expect_all_near(m.coef(),
                      {-0.6505098925500264, -0.18484347694153128, 0.32864449404183277,
                       1.3144669105348818, 0.5247143474543072, -1.2609434180977699},
                      1e-7);
      expect_all_near(m.intercept(),
                      {-0.23313363764465148, -0.6000566436990429, -0.6371015900445445}, 1e-7);
    }
  }
}

TEST(LinearSVC, GradientMatchesFiniteDifferences) {
  const auto d = make_blobs(50, 3, 3, 17);
  const auto o = tight_svc(0.4);
  std::vector<double> w(3 * 4);
  for (std::size_t p = 0; p < w.size(); ++p) w[p] = 0.2 * std::cos(2.0 + p);
  auto f = [&](const std::vector<double>& v, std::vector<double>& g) {
    double out = 0;
    comm::local::run_ranks(
        1, {}, [&](comm::Communicator& c) { out = LinearSVC::scaled_objective(d, o, c, v, g); });
    return out;
  };
  std::vector<double> g, unused;
  f(w, g);
  for (std::size_t p = 0; p < w.size(); ++p) {
    const double h = 1e-6;
    auto wp = w, wm = w;
    wp[p] += h;
    wm[p] -= h;
    EXPECT_NEAR(g[p], (f(wp, unused) - f(wm, unused)) / (2 * h), 1e-7) << "parameter " << p;
  }
}

TEST(LinearSVC, DistributedFitEqualsSingleRank) {
  for (std::int64_t classes : {2, 3}) {
    const auto all = make_blobs(211, 4, classes, 40 + classes);
    std::vector<double> objectives;
    std::vector<std::vector<std::int64_t>> predictions;
    for (int np = 1; np <= 4; ++np) {
      auto models = on_ranks(np, all, [](comm::Communicator& c, const LocalData& s) {
        LinearSVC svc(tight_svc(0.5));
        svc.fit(s, c);
        return svc;
      });
      for (const auto& m : models) EXPECT_EQ(m.coef(), models[0].coef()) << "np " << np;
      EXPECT_TRUE(models[0].converged());
      objectives.push_back(models[0].objective());
      predictions.push_back(models[0].predict(all));
    }
    for (int np = 2; np <= 4; ++np) {
      EXPECT_NEAR(objectives[np - 1], objectives[0], 1e-8 * objectives[0])
          << "classes " << classes << " np " << np;
      EXPECT_EQ(predictions[np - 1], predictions[0]) << "classes " << classes << " np " << np;
    }
  }
}

TEST(LinearSVC, HingeLossUsesSgdAndSeparatesBlobs) {
  const auto all = make_blobs(400, 3, 3, 23, 3.0);
  auto models = on_ranks(3, all, [](comm::Communicator& c, const LocalData& s) {
    LinearSVCOptions o;
    o.loss = "hinge";
    o.epochs = 30;
    LinearSVC svc(o);
    svc.fit(s, c);
    return std::make_pair(svc, svc.score(s, c));
  });
  for (const auto& [m, score] : models) EXPECT_EQ(m.coef(), models[0].first.coef());
  EXPECT_GT(models[0].second, 0.9);
  EXPECT_EQ(models[0].first.n_iter(), 30);
  EXPECT_FALSE(models[0].first.converged());
  // Far below the objective at w = 0, which is C * N per one-vs-rest problem.
  EXPECT_LT(models[0].first.objective(), 0.3 * 3 * 400);
}

TEST(LinearSVC, JsonRoundTripAndBadOptions) {
  const auto all = make_blobs(90, 2, 3, 12);
  auto m = on_ranks(2, all, [](comm::Communicator& c, const LocalData& s) {
    LinearSVC svc;
    svc.fit(s, c);
    return svc;
  })[0];
  const auto back = LinearSVC::from_json(nlohmann::json::parse(m.to_json().dump()));
  EXPECT_EQ(back.coef(), m.coef());
  EXPECT_EQ(back.decision_function(all), m.decision_function(all));
  EXPECT_EQ(back.options().loss, "squared_hinge");
  auto broken = m.to_json();
  broken.erase("intercept");
  EXPECT_THROW(LinearSVC::from_json(broken), DataError);
  LinearSVCOptions o;
  set_option(o, "loss", "hinge");
  set_option(o, "intercept_scaling", "2");
  EXPECT_EQ(o.intercept_scaling, 2);
  EXPECT_THROW(set_option(o, "solver", "lbfgs"), ConfigError);  // hinge is not smooth
  EXPECT_THROW(set_option(o, "loss", "log"), ConfigError);
  EXPECT_THROW(set_option(o, "dual", "true"), ConfigError);
  auto other = make_blobs(5, 3, 3, 1);
  EXPECT_THROW(m.predict(other), DataError);
}

}  // namespace
}  // namespace distml::ml
