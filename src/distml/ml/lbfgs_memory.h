// The limited-memory inverse-Hessian estimate that minimize_lbfgs and minimize_owlqn share:
// the last correction pairs (s, y) and the two-loop recursion that applies them (Nocedal &
// Wright, Algorithm 7.4). Internal to ml/ (lbfgs.cc, owlqn.cc); implemented in lbfgs.cc.
#pragma once

#include <algorithm>
#include <cmath>
#include <deque>
#include <vector>

namespace distml::ml {

class LbfgsMemory {
 public:
  explicit LbfgsMemory(int history) : history_(history) {}

  /// Keeps the pair s = w_new - w_old, y = g_new - g_old when its curvature s . y is positive
  /// beyond round-off, dropping the oldest pair once more than `history` are kept.
  void add(const std::vector<double>& w_old, const std::vector<double>& w_new,
           const std::vector<double>& g_old, const std::vector<double>& g_new);
  /// -H g, with H the estimate from the kept pairs (-g when there are none).
  std::vector<double> direction(const std::vector<double>& g) const;
  void clear() { pairs_.clear(); }
  bool empty() const { return pairs_.empty(); }

 private:
  struct Pair {
    std::vector<double> s, y;
    double rho;  // 1 / (s . y)
  };
  int history_;
  std::deque<Pair> pairs_;
};

namespace detail {

inline double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (std::size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

inline double max_abs(const std::vector<double>& v) {
  double m = 0;
  for (double x : v) m = std::max(m, std::abs(x));
  return m;
}

/// The ftol test both minimisers stop on: (f_old - f) / max(|f_old|, |f|, 1) <= ftol.
inline bool relative_reduction_below(double f_old, double f, double ftol) {
  return f_old - f <= ftol * std::max({std::abs(f_old), std::abs(f), 1.0});
}

}  // namespace detail
}  // namespace distml::ml
