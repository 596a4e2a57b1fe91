// Distributed minibatch SGD for the linear estimators: every step each rank takes its next
// `batch_size` local rows, and the summed gradients (with the row count) are all-reduced, so
// every rank applies the same update to the same weights.
//
// Steps per epoch are ceil(max local rows / batch_size) on every rank; a rank whose shard is
// used up contributes zero rows to the remaining steps of the epoch. Row order is a seeded
// shuffle of the local rows per (seed, rank, epoch), so results depend on the world size.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "distml/comm/communicator.h"

namespace distml::ml {

struct SgdOptions {
  double learning_rate = 0.1;  // step size of epoch e is learning_rate / sqrt(1 + e)
  int epochs = 20;
  std::size_t batch_size = 32;  // rows per rank per step
  std::uint64_t seed = 0;
};

/// Adds the summed loss gradient of the local rows `rows` at `w` to `grad` and returns their
/// summed loss.
using BatchLoss = std::function<double(std::span<const std::size_t> rows,
                                       const std::vector<double>& w, std::vector<double>& grad)>;

struct SgdResult {
  std::vector<double> w;
  int epochs = 0;
  double last_epoch_loss = 0;  // mean row loss over the last epoch (without the penalty)
};

/// Collective. Minimises (1/N) sum_i loss_i(w) + 0.5 * sum_j l2[j] * w[j]^2 from `w0`
/// (l2.size() == w0.size(); N the global row count).
SgdResult minimize_sgd(const BatchLoss& loss, std::size_t local_rows, std::vector<double> w0,
                       const std::vector<double>& l2, const SgdOptions& options,
                       comm::Communicator& comm);

}  // namespace distml::ml
