// Engine-independent correctness checks of the collectives against a serial reference.
// Every rank generates every other rank's input from (seed, rank, index), so each can
// compute the expected result alone, without trusting the communicator under test.
#pragma once

#include <string>
#include <vector>

#include "distml/comm/communicator.h"

namespace distml::test {

using comm::Algorithm;
using comm::Communicator;
using comm::DType;
using comm::ReduceOp;

/// Values whose sums, products, minima and maxima are exact in every dtype (multiples of
/// 1/4 in [-2, 2] for floats, products of +-1 and 2), so results must match bit for bit.
/// `random` draws uniform floats instead, checked against the declared bound below.
enum class Values { exact, random };

/// Error bound for floats summed over `world` ranks: (world + 1) * eps * sum |x_i|, with eps
/// 2^-24 (f32), 2^-53 (f64), 2^-11 (f16), 2^-8 (bf16): the classical bound for recursive
/// summation plus one rounding of the result.
double float_tolerance(DType dtype, int world, double abs_sum);

struct CheckResult {
  bool ok = true;
  std::string detail;  // the first mismatch when !ok
};

CheckResult check_allreduce(Communicator& comm, std::size_t count, DType dtype, ReduceOp op,
                            Algorithm algo, bool in_place, Values values = Values::exact,
                            std::uint64_t seed = 1);
CheckResult check_broadcast(Communicator& comm, std::size_t count, DType dtype, int root,
                            Algorithm algo);
CheckResult check_allgather(Communicator& comm, std::size_t count, DType dtype, Algorithm algo,
                            bool in_place);
CheckResult check_allgatherv(Communicator& comm, std::size_t count, DType dtype, Algorithm algo);
CheckResult check_reduce_scatter(Communicator& comm, std::size_t count, DType dtype, ReduceOp op,
                                 Algorithm algo);
CheckResult check_alltoall(Communicator& comm, std::size_t count, DType dtype, Algorithm algo,
                           bool in_place);

/// Runs the standard grid (counts x dtypes x ops x the given all-reduce algorithms, plus the
/// other collectives) on `comm` and returns one line per failing case.
std::vector<std::string> run_collective_grid(Communicator& comm,
                                             const std::vector<Algorithm>& allreduce_algos,
                                             const std::vector<std::size_t>& counts);

/// The element counts the issue asks for: 0, 1, 7, 1000, 65537, 2^20.
std::vector<std::size_t> standard_counts();

}  // namespace distml::test
