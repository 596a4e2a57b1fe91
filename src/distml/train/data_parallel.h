// Data parallelism for a training loop of one's own, as small as Horovod's
// DistributedOptimizer: wrap the model and its optimizer, run backward as usual, and call
// step() where the loop called optimizer.step(). Any strategy of `distml train` runs by name.
//
//   auto comm = distml::comm::connect();  // the engine and ranks `distml launch` set
//   distml::DataParallel dp(*model, optimizer, *comm, {.name = "local_sgd", .period = 4});
//   for (...) {                           // this rank's shard of the data
//     optimizer.zero_grad();
//     my_loss(model->forward(x), y).backward();
//     dp.step();                          // communicates and updates, as the strategy does
//   }
//   dp.finish();                          // one model on every rank, then done
//
// 1. The constructor starts every replica from rank 0's parameters and buffers, after
//    checking that every rank has the same names and shapes (a CommError otherwise).
// 2. One backward per step: the all-reduce strategies reduce gradients while backward runs.
//    For accumulation, call backward several times between no_sync() and step().
// 3. step() applies the update: the optimizer's own step for allreduce, local SGD, EASGD and
//    gossip (which then average models as they do); ZeRO's sharded step; a parameter
//    server's step on its servers (which run the optimizer the workers' one describes).
// 4. synchronize() makes every replica the model the run stands for (the average for local
//    SGD and gossip, the centre for EASGD) and averages BatchNorm statistics: call it before
//    evaluating or saving. finish() synchronises a last time and ends the strategy.
// A parameter server's server ranks do not train: when trains() is false, call serve(),
// which returns once every worker has called finish(). Shard the data over training_comm().
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <memory>

#include "distml/comm/communicator.h"
#include "distml/nn/model_tensors.h"
#include "distml/train/config.h"
#include "distml/train/strategy.h"

namespace distml {

class DataParallel {
 public:
  /// Collective over `comm`. The strategy's keys are those of [strategy] in a training config
  /// (docs/training.md); ConfigError when they do not fit (an unknown name, EASGD's alpha
  /// with this world size, ...). The model, optimizer and communicator must outlive this.
  DataParallel(const torch::nn::Module& model, torch::optim::Optimizer& optimizer,
               comm::Communicator& comm, const train::StrategyConfig& strategy = {});
  DataParallel(const nn::ModelTensors& model, torch::optim::Optimizer& optimizer,
               comm::Communicator& comm, const train::StrategyConfig& strategy = {});
  ~DataParallel();
  DataParallel(const DataParallel&) = delete;
  DataParallel& operator=(const DataParallel&) = delete;

  /// The next backward passes accumulate gradients without communicating, until the last
  /// backward before step(), which must follow sync().
  void no_sync() { strategy_->before_backward(false); }
  void sync() { strategy_->before_backward(true); }

  /// Collective: the update, after backward (point 3 above). With clip_grad_norm > 0 the
  /// gradient is first scaled to at most that global 2-norm (computed across ZeRO's shards).
  void step(double clip_grad_norm = 0);
  /// Collective: every replica becomes the one model (point 4 above).
  void synchronize();
  /// Collective, once at the end, on every training rank.
  void finish();

  /// False on a parameter server's server ranks; they call serve() instead of training.
  bool trains() const { return strategy_->trains(); }
  void serve() { strategy_->serve(); }
  /// The ranks that train: shard the data over its rank() and size().
  comm::Communicator& training_comm() { return training_comm_; }

  std::int64_t steps() const { return steps_; }
  train::StrategyStats stats() const { return strategy_->stats(); }

 private:
  std::unique_ptr<train::Strategy> strategy_;
  torch::optim::Optimizer& optimizer_;
  comm::Communicator& training_comm_;
  std::vector<torch::Tensor> parameters_, buffers_;
  std::int64_t steps_ = 0;
};

}  // namespace distml
