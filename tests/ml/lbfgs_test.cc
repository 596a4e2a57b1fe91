#include "distml/ml/lbfgs.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

namespace distml::ml {
namespace {

// f(w) = 0.5 * sum_i a_i (w_i - c_i)^2, badly conditioned (a from 1 to 1000).
// scipy's L-BFGS-B needs 251 iterations for tol 1e-8 here.
TEST(Lbfgs, ConvergesOnIllConditionedQuadratic) {
  const int n = 20;
  std::vector<double> a(n), c(n);
  for (int i = 0; i < n; ++i) {
    a[i] = std::pow(1000.0, i / (n - 1.0));
    c[i] = std::sin(i + 1.0);
  }
  auto f = [&](const std::vector<double>& w, std::vector<double>& g) {
    double s = 0;
    for (int i = 0; i < n; ++i) {
      s += 0.5 * a[i] * (w[i] - c[i]) * (w[i] - c[i]);
      g[i] = a[i] * (w[i] - c[i]);
    }
    return s;
  };
  LbfgsOptions o;
  o.tol = 1e-8;
  o.ftol = 0;
  o.max_iter = 1000;
  const auto r = minimize_lbfgs(f, std::vector<double>(n, 0.0), o);
  EXPECT_TRUE(r.converged) << r.message;
  EXPECT_LE(r.grad_max_abs, 1e-8);
  for (int i = 0; i < n; ++i) EXPECT_NEAR(r.w[i], c[i], 1e-8);
  EXPECT_LT(r.iterations, 400);  // scipy's L-BFGS-B takes 251
}

TEST(Lbfgs, ConvergesOnRosenbrock) {
  auto f = [](const std::vector<double>& w, std::vector<double>& g) {
    const double x = w[0], y = w[1];
    g[0] = -2 * (1 - x) - 400 * x * (y - x * x);
    g[1] = 200 * (y - x * x);
    return (1 - x) * (1 - x) + 100 * (y - x * x) * (y - x * x);
  };
  LbfgsOptions o;
  o.tol = 1e-9;
  o.ftol = 0;
  o.max_iter = 200;
  const auto r = minimize_lbfgs(f, {-1.2, 1.0}, o);
  EXPECT_TRUE(r.converged) << r.message;
  EXPECT_NEAR(r.w[0], 1.0, 1e-6);
  EXPECT_NEAR(r.w[1], 1.0, 1e-6);
  EXPECT_LT(r.objective, 1e-12);
}

TEST(Lbfgs, StopsAtMaxIterWithoutConverging) {
  auto f = [](const std::vector<double>& w, std::vector<double>& g) {
    const double x = w[0], y = w[1];
    g[0] = -2 * (1 - x) - 400 * x * (y - x * x);
    g[1] = 200 * (y - x * x);
    return (1 - x) * (1 - x) + 100 * (y - x * x) * (y - x * x);
  };
  LbfgsOptions o;
  o.max_iter = 3;
  const auto r = minimize_lbfgs(f, {-1.2, 1.0}, o);
  EXPECT_FALSE(r.converged);
  EXPECT_EQ(r.iterations, 3);
  EXPECT_EQ(r.message, "max_iter reached");
}

TEST(Lbfgs, ReturnsAtOnceWhenStartIsOptimal) {
  int calls = 0;
  auto f = [&](const std::vector<double>& w, std::vector<double>& g) {
    ++calls;
    g[0] = 2 * w[0];
    return w[0] * w[0];
  };
  const auto r = minimize_lbfgs(f, {0.0});
  EXPECT_TRUE(r.converged);
  EXPECT_EQ(r.iterations, 0);
  EXPECT_EQ(calls, 1);
}

// A step into a region where the objective is not finite is shortened, not taken.
TEST(Lbfgs, BacksOffFromNonFiniteValues) {
  auto f = [](const std::vector<double>& w, std::vector<double>& g) {
    // -log(1 - x) + x^2: defined for x < 1, minimum inside.
    if (w[0] >= 1) return std::numeric_limits<double>::infinity();
    g[0] = 1 / (1 - w[0]) + 2 * w[0];
    return -std::log(1 - w[0]) + w[0] * w[0];
  };
  LbfgsOptions o;
  o.tol = 1e-10;
  const auto r = minimize_lbfgs(f, {0.9}, o);
  EXPECT_TRUE(r.converged) << r.message;
  // Stationary point: 1/(1-x) = -2x  ->  2x^2 - 2x - 1 = 0, x = (1 - sqrt(3)) / 2.
  EXPECT_NEAR(r.w[0], (1 - std::sqrt(3.0)) / 2, 1e-8);
}

// 0.5 * sum_i a_i (w_i - c_i)^2 + sum_i l_i |w_i| is minimised coordinate by coordinate by
// soft thresholding: w_i = sign(c_i) * max(|c_i| - l_i / a_i, 0). The minimum value is about
// 32, so the decrease per step falls below the resolution of F (32 eps) while the
// pseudo-gradient is still near 2e-9: ftol = 0 lets it run until then, and the solution is
// checked to 1e-8.
TEST(OwlQn, SoftThresholdsSeparableQuadratic) {
  const int n = 12;
  std::vector<double> a(n), c(n), l1(n);
  for (int i = 0; i < n; ++i) {
    a[i] = std::pow(10.0, i / (n - 1.0));
    c[i] = 2 * std::sin(i + 1.0);
    l1[i] = i % 4 == 0 ? 0.0 : 1.2 * a[i] * (1 + std::cos(3.0 * i));  // some unpenalised
  }
  auto f = [&](const std::vector<double>& w, std::vector<double>& g) {
    double s = 0;
    for (int i = 0; i < n; ++i) {
      s += 0.5 * a[i] * (w[i] - c[i]) * (w[i] - c[i]);
      g[i] = a[i] * (w[i] - c[i]);
    }
    return s;
  };
  LbfgsOptions o;
  o.tol = 1e-10;
  o.ftol = 0;
  o.max_iter = 1000;
  const auto r = minimize_owlqn(f, std::vector<double>(n, 0.5), l1, o);
  EXPECT_TRUE(r.converged) << r.message;
  EXPECT_LE(r.grad_max_abs, 1e-7);
  double want_objective = 0;
  int zeros = 0;
  for (int i = 0; i < n; ++i) {
    const double want = std::copysign(std::max(std::abs(c[i]) - l1[i] / a[i], 0.0), c[i]);
    want_objective += 0.5 * a[i] * (want - c[i]) * (want - c[i]) + l1[i] * std::abs(want);
    if (want == 0) {
      ++zeros;
      EXPECT_EQ(r.w[i], 0.0) << "at " << i;  // exactly: the orthant projection puts it there
    }
    EXPECT_NEAR(r.w[i], want, 1e-8) << "at " << i;
  }
  EXPECT_EQ(zeros, 3);
  EXPECT_NEAR(r.objective, want_objective, 1e-14 * want_objective);
}

// One coordinate, f = (w - 3)^2 + l |w|: the minimum is 3 - l/2 for l < 6, else the kink at 0
// (where the pseudo-gradient is 0). From the wrong side the first step stops at 0, the next
// leaves it on the right.
TEST(OwlQn, OneCoordinateCrossesZeroOrStopsAtTheKink) {
  int calls = 0;
  auto f = [&](const std::vector<double>& w, std::vector<double>& g) {
    ++calls;
    g[0] = 2 * (w[0] - 3);
    return (w[0] - 3) * (w[0] - 3);
  };
  auto r = minimize_owlqn(f, {-1.0}, {2.0});
  EXPECT_TRUE(r.converged) << r.message;
  EXPECT_NEAR(r.w[0], 2.0, 1e-12);
  EXPECT_NEAR(r.objective, 5.0, 1e-14);

  r = minimize_owlqn(f, {-2.0}, {8.0});
  EXPECT_TRUE(r.converged) << r.message;
  EXPECT_EQ(r.w[0], 0.0);
  EXPECT_EQ(r.objective, 9.0);
  EXPECT_EQ(r.grad_max_abs, 0.0);

  calls = 0;
  r = minimize_owlqn(f, {0.0}, {8.0});  // already there: one evaluation
  EXPECT_TRUE(r.converged);
  EXPECT_EQ(r.iterations, 0);
  EXPECT_EQ(calls, 1);
}

// Without L1 weights OWL-QN is L-BFGS with a backtracking line search: the same minima.
TEST(OwlQn, WithoutL1WeightsReachesTheLbfgsMinimum) {
  auto rosenbrock = [](const std::vector<double>& w, std::vector<double>& g) {
    const double x = w[0], y = w[1];
    g[0] = -2 * (1 - x) - 400 * x * (y - x * x);
    g[1] = 200 * (y - x * x);
    return (1 - x) * (1 - x) + 100 * (y - x * x) * (y - x * x);
  };
  LbfgsOptions o;
  o.tol = 1e-9;
  o.ftol = 0;
  o.max_iter = 500;
  const auto ours = minimize_owlqn(rosenbrock, {-1.2, 1.0}, {0.0, 0.0}, o);
  const auto lbfgs = minimize_lbfgs(rosenbrock, {-1.2, 1.0}, o);
  EXPECT_TRUE(ours.converged) << ours.message;
  EXPECT_LE(ours.grad_max_abs, 1e-9);
  EXPECT_NEAR(ours.w[0], lbfgs.w[0], 1e-6);
  EXPECT_NEAR(ours.w[1], lbfgs.w[1], 1e-6);
  EXPECT_LT(ours.objective, 1e-12);
  EXPECT_LT(lbfgs.objective, 1e-12);
}

TEST(OwlQn, StopsAtMaxIterWithoutConverging) {
  auto f = [](const std::vector<double>& w, std::vector<double>& g) {
    const double x = w[0], y = w[1];
    g[0] = -2 * (1 - x) - 400 * x * (y - x * x);
    g[1] = 200 * (y - x * x);
    return (1 - x) * (1 - x) + 100 * (y - x * x) * (y - x * x);
  };
  LbfgsOptions o;
  o.max_iter = 3;
  const auto r = minimize_owlqn(f, {-1.2, 1.0}, {0.1, 0.1}, o);
  EXPECT_FALSE(r.converged);
  EXPECT_EQ(r.iterations, 3);
  EXPECT_EQ(r.message, "max_iter reached");
}

}  // namespace
}  // namespace distml::ml
