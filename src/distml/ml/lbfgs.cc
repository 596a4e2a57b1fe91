#include "distml/ml/lbfgs.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "distml/ml/lbfgs_memory.h"

namespace distml::ml {

// LbfgsMemory (lbfgs_memory.h).

void LbfgsMemory::add(const std::vector<double>& w_old, const std::vector<double>& w_new,
                      const std::vector<double>& g_old, const std::vector<double>& g_new) {
  Pair p;
  p.s.resize(w_old.size());
  p.y.resize(w_old.size());
  for (std::size_t i = 0; i < w_old.size(); ++i) {
    p.s[i] = w_new[i] - w_old[i];
    p.y[i] = g_new[i] - g_old[i];
  }
  const double sy = detail::dot(p.s, p.y);
  if (!(sy > std::numeric_limits<double>::epsilon() * detail::dot(p.y, p.y))) return;
  p.rho = 1 / sy;
  pairs_.push_back(std::move(p));
  if (static_cast<int>(pairs_.size()) > history_) pairs_.pop_front();
}

std::vector<double> LbfgsMemory::direction(const std::vector<double>& g) const {
  using detail::dot;
  std::vector<double> q = g;
  std::vector<double> alpha(pairs_.size());
  for (std::size_t k = pairs_.size(); k-- > 0;) {
    const auto& c = pairs_[k];
    alpha[k] = c.rho * dot(c.s, q);
    for (std::size_t i = 0; i < q.size(); ++i) q[i] -= alpha[k] * c.y[i];
  }
  if (!pairs_.empty()) {
    const auto& last = pairs_.back();
    const double gamma = dot(last.s, last.y) / dot(last.y, last.y);
    for (double& v : q) v *= gamma;
  }
  for (std::size_t k = 0; k < pairs_.size(); ++k) {
    const auto& c = pairs_[k];
    const double beta = c.rho * dot(c.y, q);
    for (std::size_t i = 0; i < q.size(); ++i) q[i] += (alpha[k] - beta) * c.s[i];
  }
  for (double& v : q) v = -v;
  return q;
}

namespace {

using detail::dot;
using detail::max_abs;

// One point of the line search phi(a) = f(w + a d).
struct Trial {
  double a = 0, f = 0, dphi = 0;
  std::vector<double> w, g;
  bool finite() const { return std::isfinite(f) && std::isfinite(dphi); }
};

// Strong-Wolfe line search: bracketing (Nocedal & Wright Algorithm 3.5), then zoom (3.6) with
// safeguarded cubic interpolation. When the evaluations run out it falls back to the best
// point with sufficient decrease, if there is one.
class LineSearch {
 public:
  LineSearch(const LbfgsObjective& fn, const LbfgsOptions& o, const Trial& start,
             const std::vector<double>& d)
      : fn_(fn), o_(o), start_(start), d_(d) {}

  bool run(double a, Trial& out) {
    Trial prev = start_;
    prev.a = 0;
    while (used_ < o_.max_linesearch) {
      Trial cur = eval(a);
      if (!cur.finite() || !armijo(cur) || cur.f >= prev.f) return zoom(prev, cur, out);
      if (std::abs(cur.dphi) <= -o_.c2 * start_.dphi) return accept(cur, out);
      if (cur.dphi >= 0) return zoom(cur, prev, out);
      prev = std::move(cur);
      a *= 2;
    }
    return fallback(prev, out);
  }

  int evaluations() const { return used_; }

 private:
  bool zoom(Trial lo, Trial hi, Trial& out) {
    while (used_ < o_.max_linesearch) {
      const double width = std::abs(hi.a - lo.a);
      if (width <= std::numeric_limits<double>::epsilon() * std::max(lo.a, hi.a)) break;
      Trial t = eval(interpolate(lo, hi));
      if (!t.finite() || !armijo(t) || t.f >= lo.f) {
        hi = std::move(t);
        continue;
      }
      if (std::abs(t.dphi) <= -o_.c2 * start_.dphi) return accept(t, out);
      if (t.dphi * (hi.a - lo.a) >= 0) hi = lo;
      lo = std::move(t);
    }
    return fallback(lo, out);
  }

  // The minimiser of the cubic through (a, f, dphi) at both ends, kept at least a tenth of the
  // interval away from either end; bisection when the cubic is not usable.
  static double interpolate(const Trial& lo, const Trial& hi) {
    const double a_min = std::min(lo.a, hi.a), a_max = std::max(lo.a, hi.a);
    const double margin = 0.1 * (a_max - a_min);
    const double mid = 0.5 * (lo.a + hi.a);
    if (!lo.finite() || !hi.finite()) return mid;
    const double d1 = lo.dphi + hi.dphi - 3 * (lo.f - hi.f) / (lo.a - hi.a);
    const double disc = d1 * d1 - lo.dphi * hi.dphi;
    if (!(disc >= 0)) return mid;
    const double d2 = std::copysign(std::sqrt(disc), hi.a - lo.a);
    const double a = hi.a - (hi.a - lo.a) * (hi.dphi + d2 - d1) / (hi.dphi - lo.dphi + 2 * d2);
    if (!std::isfinite(a)) return mid;
    return std::clamp(a, a_min + margin, a_max - margin);
  }

  Trial eval(double a) {
    Trial t;
    t.a = a;
    t.w = start_.w;
    for (std::size_t i = 0; i < t.w.size(); ++i) t.w[i] += a * d_[i];
    t.g.assign(t.w.size(), 0.0);
    t.f = fn_(t.w, t.g);
    t.dphi = dot(t.g, d_);
    ++used_;
    return t;
  }

  bool armijo(const Trial& t) const { return t.f <= start_.f + o_.c1 * t.a * start_.dphi; }
  static bool accept(Trial& t, Trial& out) {
    out = std::move(t);
    return true;
  }
  bool fallback(Trial& best, Trial& out) const {
    if (best.a <= 0 || !best.finite() || !(best.f < start_.f)) return false;
    return accept(best, out);
  }

  const LbfgsObjective& fn_;
  const LbfgsOptions& o_;
  const Trial& start_;
  const std::vector<double>& d_;
  int used_ = 0;
};

}  // namespace

LbfgsResult minimize_lbfgs(const LbfgsObjective& objective, std::vector<double> w0,
                           const LbfgsOptions& options) {
  LbfgsResult r;
  Trial x;
  x.w = std::move(w0);
  x.g.assign(x.w.size(), 0.0);
  x.f = objective(x.w, x.g);
  r.evaluations = 1;
  LbfgsMemory memory(options.history);
  bool stop = false;
  if (!std::isfinite(x.f)) {
    r.message = "the objective is not finite at the starting point";
    stop = true;
  } else if (max_abs(x.g) <= options.tol) {
    r.converged = true;
    r.message = "max-abs gradient below tol";
    stop = true;
  }
  while (!stop && r.iterations < options.max_iter) {
    std::vector<double> d = memory.direction(x.g);
    x.dphi = dot(x.g, d);
    if (!(x.dphi < 0)) {  // not a descent direction (round-off in the memory): restart
      memory.clear();
      d = memory.direction(x.g);
      x.dphi = dot(x.g, d);
    }
    // Without curvature information the first step has length min(1, ||d||) as in L-BFGS-B.
    const double a0 = memory.empty() ? std::min(1.0, 1.0 / std::sqrt(dot(d, d))) : 1.0;
    // At the limit of floating point the line search cannot find a decrease: stop first when
    // even the full step promises less than ftol (relative).
    if (-a0 * x.dphi <= options.ftol * std::max(std::abs(x.f), 1.0)) {
      r.converged = true;
      r.message = "predicted relative reduction of the objective below ftol";
      break;
    }
    LineSearch search(objective, options, x, d);
    Trial next;
    const bool found = search.run(a0, next);
    r.evaluations += search.evaluations();
    if (!found) {
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
    if (max_abs(x.g) <= options.tol) {
      r.converged = true;
      r.message = "max-abs gradient below tol";
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
  r.grad_max_abs = max_abs(x.g);
  r.w = std::move(x.w);
  return r;
}

}  // namespace distml::ml
