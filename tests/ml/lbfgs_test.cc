#include "distml/ml/lbfgs.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace distml::ml
