// Parallax's sparsity-aware hybrid (Kim et al., EuroSys 2019): the gradients of embedding
// tables travel as (row id, row) pairs to parameter servers that own row shards, while the
// dense gradients go by all-reduce in the same step. A table's gradient touches a few of its
// rows per batch, so the hybrid sends those rows instead of the whole table.
//
// The step, with the trainer's hooks:
//  1. setup() gives every rank rank 0's model, then takes the parameters the model marks sparse
//     (nn::ModelTensors::sparse_names: Embedding / EmbeddingBag with sparse(true)) as row-sharded
//     tables, one server shard on every rank (row_sharded_table.h), and hands the rest to an
//     all-reduce strategy (allreduce_strategy.h) of its own.
//  2. During backward the dense buckets all-reduce as under strategy allreduce; the tables'
//     sparse gradients accumulate in .grad().
//  3. before_optimizer_step(): the dense averages are in .grad().
//  4. optimizer_step(): each table's rows go to their owners, which apply SGD to them at the
//     optimizer's current learning rate and send the updated rows to every rank; the tables'
//     .grad() is then cleared, so the optimizer's own step updates the dense parameters only.
// Plain SGD (no momentum, no weight decay) makes this the dense step exactly: a row that no
// rank touched has a zero gradient and stays. Other optimizers change untouched rows too
// (momentum, decay), which a row exchange cannot do; the factory refuses them.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "distml/comm/communicator.h"
#include "distml/train/strategies/allreduce_strategy.h"
#include "distml/train/strategies/row_sharded_table.h"
#include "distml/train/strategy.h"

namespace distml::train {

struct HybridStrategyOptions {
  AllreduceStrategyOptions dense;  // the all-reduce of the dense parameters
};

class HybridStrategy final : public Strategy {
 public:
  HybridStrategy(comm::Communicator& comm, HybridStrategyOptions options = {});

  /// ConfigError when the model has no sparse parameter (the hybrid would be strategy
  /// allreduce).
  void setup(const nn::ModelTensors& model) override;
  void before_backward(bool sync) override;
  void before_optimizer_step() override;
  /// UsageError: the tables' gradients are each rank's own until their owners average them.
  void clip_gradients(double max_norm, const std::vector<torch::Tensor>& parameters) override;
  void optimizer_step(torch::optim::Optimizer& optimizer) override;
  void resumed_at(std::int64_t global_step) override;
  StrategyStats stats() const override;
  nlohmann::json report() const override;

 private:
  struct Table {
    std::string name;
    torch::Tensor parameter;
    RowShardedTable rows;
  };

  comm::Communicator& comm_;
  HybridStrategyOptions options_;
  std::unique_ptr<AllreduceStrategy> dense_;  // null when every parameter is sparse
  std::vector<Table> tables_;
  std::size_t sparse_bytes_ = 0;  // in total
  double sparse_seconds_ = 0;     // last step's row exchange
};

}  // namespace distml::train
