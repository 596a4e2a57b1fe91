// OWL-QN: L-BFGS for a smooth objective plus a weighted L1 term, kept inside one orthant per
// line search. The steps are listed at minimize_owlqn in lbfgs.h.
#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "distml/core/error.h"
#include "distml/ml/lbfgs.h"
#include "distml/ml/lbfgs_memory.h"

namespace distml::ml {
namespace {

using detail::dot;
using detail::max_abs;

// One point: F = f + sum_i l1_i |w_i|, f's gradient g and F's pseudo-gradient pg.
struct Point {
  std::vector<double> w, g, pg;
  double f = 0;  // F, the L1 term included
};

Point evaluate(const LbfgsObjective& objective, const std::vector<double>& l1,
               std::vector<double> w) {
  Point p;
  p.w = std::move(w);
  p.g.assign(p.w.size(), 0.0);
  p.f = objective(p.w, p.g);
  p.pg.resize(p.w.size());
  for (std::size_t i = 0; i < p.w.size(); ++i) {
    const double w_i = p.w[i], g = p.g[i], c = l1[i];
    p.f += c * std::abs(w_i);
    if (w_i > 0)
      p.pg[i] = g + c;
    else if (w_i < 0)
      p.pg[i] = g - c;
    else if (g + c < 0)  // F decreases to the right of 0
      p.pg[i] = g + c;
    else if (g - c > 0)  // F decreases to the left of 0
      p.pg[i] = g - c;
    else
      p.pg[i] = 0;
  }
  return p;
}

// -H pg, with the penalised components that would move against -pg set to 0.
std::vector<double> direction(const LbfgsMemory& memory, const Point& x,
                              const std::vector<double>& l1) {
  std::vector<double> d = memory.direction(x.pg);
  for (std::size_t i = 0; i < d.size(); ++i)
    if (l1[i] > 0 && d[i] * x.pg[i] >= 0) d[i] = 0;
  return d;
}

// Backtracks from step `a` along d, each trial projected onto the orthant of x, until the
// decrease is sufficient; false when the evaluations run out first.
bool line_search(const LbfgsObjective& objective, const std::vector<double>& l1,
                 const LbfgsOptions& o, const Point& x, const std::vector<double>& d, double a,
                 Point& out, int& evaluations) {
  const std::size_t n = x.w.size();
  std::vector<double> orthant(n);
  for (std::size_t i = 0; i < n; ++i) {
    const double v = x.w[i] != 0 ? x.w[i] : -x.pg[i];
    orthant[i] = v > 0 ? 1.0 : v < 0 ? -1.0 : 0.0;
  }
  for (int k = 0; k < o.max_linesearch; ++k, a *= 0.5) {
    std::vector<double> w(n);
    for (std::size_t i = 0; i < n; ++i) {
      w[i] = x.w[i] + a * d[i];
      if (l1[i] > 0 && w[i] * orthant[i] <= 0) w[i] = 0;
    }
    Point t = evaluate(objective, l1, std::move(w));
    ++evaluations;
    double predicted = 0;  // pg . (w_new - w): negative along a descent direction
    for (std::size_t i = 0; i < n; ++i) predicted += x.pg[i] * (t.w[i] - x.w[i]);
    if (predicted < 0 && std::isfinite(t.f) && t.f <= x.f + o.c1 * predicted) {
      out = std::move(t);
      return true;
    }
  }
  return false;
}

}  // namespace

LbfgsResult minimize_owlqn(const LbfgsObjective& objective, std::vector<double> w0,
                           const std::vector<double>& l1, const LbfgsOptions& options) {
  DML_CHECK_EQ(l1.size(), w0.size(), "one L1 weight per coordinate");
  for (double c : l1) DML_CHECK(c >= 0 && std::isfinite(c), "L1 weights must be finite, >= 0");
  LbfgsResult r;
  Point x = evaluate(objective, l1, std::move(w0));
  r.evaluations = 1;
  LbfgsMemory memory(options.history);
  bool stop = false;
  if (!std::isfinite(x.f)) {
    r.message = "the objective is not finite at the starting point";
    stop = true;
  } else if (max_abs(x.pg) <= options.tol) {
    r.converged = true;
    r.message = "max-abs pseudo-gradient below tol";
    stop = true;
  }
  while (!stop && r.iterations < options.max_iter) {
    std::vector<double> d = direction(memory, x, l1);
    double slope = dot(x.pg, d);
    if (!(slope < 0)) {  // round-off in the memory, or the sign constraint undid descent
      memory.clear();
      d = direction(memory, x, l1);
      slope = dot(x.pg, d);
    }
    const double a0 = memory.empty() ? std::min(1.0, 1.0 / std::sqrt(dot(d, d))) : 1.0;
    if (-a0 * slope <= options.ftol * std::max(std::abs(x.f), 1.0)) {
      r.converged = true;
      r.message = "predicted relative reduction of the objective below ftol";
      break;
    }
    Point next;
    if (!line_search(objective, l1, options, x, d, a0, next, r.evaluations)) {
      if (!memory.empty()) {  // retry once along the steepest descent
        memory.clear();
        continue;
      }
      r.message = "the line search found no point with sufficient decrease";
      break;
    }
    memory.add(x.w, next.w, x.g, next.g);
    const double f_old = x.f;
    x = std::move(next);
    ++r.iterations;
    if (max_abs(x.pg) <= options.tol) {
      r.converged = true;
      r.message = "max-abs pseudo-gradient below tol";
      break;
    }
    if (detail::relative_reduction_below(f_old, x.f, options.ftol)) {
      r.converged = true;
      r.message = "relative reduction of the objective below ftol";
      break;
    }
  }
  if (r.message.empty()) r.message = "max_iter reached";
  r.objective = x.f;
  r.grad_max_abs = max_abs(x.pg);
  r.w = std::move(x.w);
  return r;
}

}  // namespace distml::ml
