// Sums over rows and ranks that come out bit-identical whatever the order of addition, so that
// what is decided from them (GBDT splits, leaf values, baselines, early stopping) does not
// depend on the world size or on how the rows are spread over the ranks.
#pragma once

#include <span>
#include <vector>

#include "distml/comm/communicator.h"

namespace distml::ml {

/// Collective. Rounds every v[i] to a multiple of one power of two q, the same on every rank,
/// chosen from the largest |v[i]| over all ranks and `global_count` (terms over all ranks) so
/// that every sum of up to global_count rounded terms is exact in f64. q is about 2^-52 of the
/// largest possible sum, so the rounding changes each term by a negligible relative amount.
/// Returns q.
double round_for_exact_sums(comm::Communicator& comm, std::span<double> v, double global_count);

/// Collective. round_for_exact_sums on each of `vs`, each on its own grid, with one all-reduce
/// for all (GBDT's gradients and hessians of every class in a round). Returns each one's q.
std::vector<double> round_each_for_exact_sums(comm::Communicator& comm,
                                              std::span<const std::span<double>> vs,
                                              double global_count);

/// Collective. The sum of every rank's v, each term rounded as by round_for_exact_sums.
double exact_global_sum(comm::Communicator& comm, std::span<const double> v);

}  // namespace distml::ml
