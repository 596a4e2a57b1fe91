#include "distml/ml/exact_sum.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace distml::ml {
namespace {

// The grid: with |sum| <= bound < 2^e, multiples of 2^(e-52) up to 2^53 of them are exact.
double grid_for(double max_abs, double count) {
  const double bound = max_abs * count;
  if (!(bound > 0)) return 1.0;
  int e = 0;
  std::frexp(bound, &e);
  return std::max(std::ldexp(1.0, e - 52), std::numeric_limits<double>::denorm_min());
}

}  // namespace

std::vector<double> round_each_for_exact_sums(comm::Communicator& comm,
                                              std::span<const std::span<double>> vs,
                                              double global_count) {
  std::vector<double> q(vs.size(), 0.0);  // each one's largest |x|, then its grid
  for (std::size_t i = 0; i < vs.size(); ++i)
    for (double x : vs[i]) q[i] = std::max(q[i], std::abs(x));
  comm.allreduce(comm::view(q), {comm::ReduceOp::max});
  for (std::size_t i = 0; i < vs.size(); ++i) {
    q[i] = grid_for(q[i], global_count);
    for (double& x : vs[i]) x = std::nearbyint(x / q[i]) * q[i];
  }
  return q;
}

double round_for_exact_sums(comm::Communicator& comm, std::span<double> v, double global_count) {
  return round_each_for_exact_sums(comm, {&v, 1}, global_count)[0];
}

double exact_global_sum(comm::Communicator& comm, std::span<const double> v) {
  double count = static_cast<double>(v.size());
  comm.allreduce(comm::Buffer{&count, 1, comm::DType::f64});
  std::vector<double> terms(v.begin(), v.end());
  round_for_exact_sums(comm, terms, count);
  double sum = 0;
  for (double x : terms) sum += x;
  comm.allreduce(comm::Buffer{&sum, 1, comm::DType::f64});
  return sum;
}

}  // namespace distml::ml
