#include "distml/ml/minibatch_sgd.h"

#include <algorithm>
#include <cmath>

#include "distml/core/error.h"
#include "distml/data/permutation.h"

namespace distml::ml {

SgdResult minimize_sgd(const BatchLoss& loss, std::size_t local_rows, std::vector<double> w0,
                       const std::vector<double>& l2, const SgdOptions& options,
                       comm::Communicator& comm) {
  DML_CHECK_EQ(l2.size(), w0.size(), "one penalty weight per parameter");
  DML_CHECK(options.batch_size > 0, "batch_size must be positive");
  double most_rows = static_cast<double>(local_rows);
  comm.allreduce(comm::Buffer{&most_rows, 1, comm::DType::f64}, {comm::ReduceOp::max});
  const auto steps =
      static_cast<std::size_t>(std::ceil(most_rows / static_cast<double>(options.batch_size)));
  // Mixing the rank into the seed gives each shard its own order.
  const std::uint64_t seed =
      options.seed ^ (0x9e3779b97f4a7c15ULL * (static_cast<std::uint64_t>(comm.rank()) + 1));

  SgdResult r;
  r.w = std::move(w0);
  const std::size_t p = r.w.size();
  std::vector<double> buf(p + 2);  // gradient sum, loss sum, row count
  for (int epoch = 0; epoch < options.epochs; ++epoch) {
    const auto order = data::shuffled_permutation(local_rows, seed, epoch);
    const double rate = options.learning_rate / std::sqrt(1.0 + epoch);
    double epoch_loss = 0, epoch_rows = 0;
    for (std::size_t step = 0; step < steps; ++step) {
      const std::size_t begin = std::min(local_rows, step * options.batch_size);
      const std::size_t end = std::min(local_rows, begin + options.batch_size);
      std::fill(buf.begin(), buf.end(), 0.0);
      std::vector<double> grad(p, 0.0);
      buf[p] = loss(std::span(order).subspan(begin, end - begin), r.w, grad);
      buf[p + 1] = static_cast<double>(end - begin);
      std::copy(grad.begin(), grad.end(), buf.begin());
      comm.allreduce(comm::Buffer{buf.data(), buf.size(), comm::DType::f64});
      const double count = buf[p + 1];
      if (count == 0) continue;
      for (std::size_t j = 0; j < p; ++j) r.w[j] -= rate * (buf[j] / count + l2[j] * r.w[j]);
      epoch_loss += buf[p];
      epoch_rows += count;
    }
    r.last_epoch_loss = epoch_rows > 0 ? epoch_loss / epoch_rows : 0;
    r.epochs = epoch + 1;
  }
  return r;
}

}  // namespace distml::ml
