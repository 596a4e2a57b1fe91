// A limited-memory BFGS minimiser (Nocedal & Wright, "Numerical Optimization", 2nd ed.,
// Algorithms 7.4 and 3.5/3.6) for the smooth objectives of the linear estimators, and OWL-QN
// for those objectives plus an L1 term (owlqn.cc). Both stop like
// scipy's L-BFGS-B as scikit-learn calls it: max-abs gradient below `tol`, or a relative
// decrease of the objective below `ftol`, or `max_iter` iterations.
//
// Distributed use: the objective is already global (the caller all-reduces loss and gradient
// inside it), so every rank receives the same bits from it. Everything the minimiser does
// after that (two-loop recursion, line-search trials and decisions, stopping tests) is plain
// deterministic floating point on those bits, so all ranks take identical steps, evaluate the
// objective the same number of times and so issue the same collectives in the same order.
// This needs an all-reduce that gives bit-identical results on every rank (the local, ring and
// tree algorithms do).
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace distml::ml {

struct LbfgsOptions {
  int max_iter = 100;  // iterations (each one line search)
  int history = 10;    // correction pairs kept (scipy's maxcor)
  double tol = 1e-4;   // on the max-abs projected gradient, like sklearn's pgtol
  double ftol = 64 * 2.220446049250313e-16;  // (f_k - f_k+1) / max(|f_k|, |f_k+1|, 1), as sklearn
  int max_linesearch = 50;  // objective evaluations per line search (scipy's maxls)
  double c1 = 1e-4;         // sufficient decrease (Armijo)
  double c2 = 0.9;          // curvature (strong Wolfe)
};

struct LbfgsResult {
  std::vector<double> w;    // the minimiser found
  double objective = 0;     // objective at w
  double grad_max_abs = 0;  // max |gradient| at w
  int iterations = 0;       // completed line searches
  int evaluations = 0;      // objective calls, the first one included
  bool converged = false;   // stopped on tol or ftol (not on max_iter or a failed line search)
  std::string message;      // why it stopped
};

/// Returns the objective at `w` and writes its gradient to `grad` (already sized like w).
using LbfgsObjective =
    std::function<double(const std::vector<double>& w, std::vector<double>& grad)>;

/// Minimises `objective` from `w0` with a strong-Wolfe line search. A non-finite objective
/// value counts as "too far" and shortens the step.
LbfgsResult minimize_lbfgs(const LbfgsObjective& objective, std::vector<double> w0,
                           const LbfgsOptions& options = {});

/// Minimises F(w) = objective(w) + sum_i l1[i] * |w_i| by OWL-QN (Andrew & Gao, ICML 2007,
/// "Scalable training of L1-regularized log-linear models"): `objective` is the smooth part and
/// l1[i] >= 0 the weight of coordinate i (0 = unpenalised; with all 0 this is L-BFGS with a
/// backtracking line search). Each iteration (unpenalised coordinates are neither
/// sign-constrained nor projected):
///  1. the pseudo-gradient pg: F's partial derivative where w_i != 0; at w_i = 0 the one-sided
///     derivative that descends, or 0 when neither side does;
///  2. d = -H pg from the L-BFGS memory, components whose sign disagrees with -pg set to 0;
///  3. the orthant: sign(w_i), or sign(-pg_i) where w_i = 0;
///  4. backtracking (halving; the first step as in minimize_lbfgs) along w + a d, coordinates
///     that leave the orthant set to 0, until F(w_new) <= F(w) + c1 * pg . (w_new - w);
///  5. the pair s = w_new - w, y = the change of objective's gradient joins the memory.
/// Stops on max |pg| <= tol, a relative reduction of F below ftol, or max_iter (c2 is unused).
/// The result's objective is F and grad_max_abs is max |pg|. Deterministic like
/// minimize_lbfgs, so the distributed use above holds.
LbfgsResult minimize_owlqn(const LbfgsObjective& objective, std::vector<double> w0,
                           const std::vector<double>& l1, const LbfgsOptions& options = {});

}  // namespace distml::ml
