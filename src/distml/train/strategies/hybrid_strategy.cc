#include "distml/train/strategies/hybrid_strategy.h"

#include "distml/core/clock.h"
#include "distml/core/error.h"
#include "distml/train/strategies/replicas.h"
#include "distml/train/strategies/row_sharded_flat.h"

namespace distml::train {

HybridStrategy::HybridStrategy(comm::Communicator& comm, HybridStrategyOptions options)
    : comm_(comm), options_(std::move(options)) {}

// 1.
void HybridStrategy::setup(const nn::ModelTensors& model) {
  const auto trainable = start_from_rank0(model, comm_);
  nn::ModelTensors dense{.buffer_names = model.buffer_names, .buffers = model.buffers};
  for (std::size_t i = 0; i < trainable.tensors.size(); ++i) {
    const auto& name = trainable.names[i];
    const auto& tensor = trainable.tensors[i];
    if (model.is_sparse(name)) {
      const int tag = kFirstTableTag + 2 * static_cast<int>(tables_.size());
      tables_.push_back({name, tensor, RowShardedTable(comm_, tensor, tag)});
    } else {
      dense.parameter_names.push_back(name);
      dense.parameters.push_back(tensor);
    }
  }
  if (tables_.empty())
    throw ConfigError(
        "strategy.name = \"hybrid\" serves the rows of sparse embeddings, and this model has "
        "none (model fasttext has one; a module's Embedding or EmbeddingBag needs sparse=true); "
        "use strategy.name = \"allreduce\"");
  if (dense.parameters.empty()) return;
  dense_ = std::make_unique<AllreduceStrategy>(comm_, options_.dense);
  dense_->setup(dense);
}

void HybridStrategy::before_backward(bool sync) {
  if (dense_) dense_->before_backward(sync);
}

// 3.
void HybridStrategy::before_optimizer_step() {
  if (dense_) dense_->before_optimizer_step();
}

void HybridStrategy::clip_gradients(double, const std::vector<torch::Tensor>&) {
  throw UsageError(
      "strategy hybrid does not clip gradients: a table's gradient is each rank's own until its "
      "owners average it; pass clip_grad_norm = 0, or use strategy allreduce");
}

// 4.
void HybridStrategy::optimizer_step(torch::optim::Optimizer& optimizer) {
  const double lr = optimizer.param_groups().front().options().get_lr();
  const auto start = Clock::now();
  for (auto& t : tables_) {
    sparse_bytes_ += t.rows.step(t.parameter.grad(), lr);
    t.parameter.mutable_grad() = torch::Tensor();
  }
  sparse_seconds_ = seconds_since(start);
  optimizer.step();
}

void HybridStrategy::resumed_at(std::int64_t global_step) {
  if (dense_) dense_->resumed_at(global_step);
}

// The row exchange runs after backward: it adds to the time communicated and to the time the
// step waited, and hides behind nothing.
StrategyStats HybridStrategy::stats() const {
  StrategyStats s = dense_ ? dense_->stats() : StrategyStats{};
  s.bytes_sent += sparse_bytes_;
  s.comm_seconds += sparse_seconds_;
  s.exposed_seconds += sparse_seconds_;
  return s;
}

nlohmann::json HybridStrategy::report() const {
  std::vector<std::string> names;
  for (const auto& t : tables_) names.push_back(t.name);
  return {{"sparse_parameters", names},
          {"sparse_bytes_sent", sparse_bytes_},
          {"dense_bytes_sent", dense_ ? dense_->stats().bytes_sent : 0}};
}

}  // namespace distml::train
