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

double round_for_exact_sums(comm::Communicator& comm, std::span<double> v, double global_count) {
  double max_abs = 0;
  for (double x : v) max_abs = std::max(max_abs, std::abs(x));
  comm.allreduce(comm::Buffer{&max_abs, 1, comm::DType::f64}, {comm::ReduceOp::max});
  const double q = grid_for(max_abs, global_count);
  for (double& x : v) x = std::nearbyint(x / q) * q;
  return q;
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
