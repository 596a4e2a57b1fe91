// Asynchronous Elastic Averaging SGD (Zhang, Choromanska & LeCun 2015, Algorithm 2): the last
// rank holds the centre variable x~, the other ranks are workers that train on their own
// shards and every tau steps pull towards the centre while pulling the centre towards them,
// each on its own schedule, with no barrier between workers.
//
// The exchange, step by step:
//  1. setup() gives every rank rank 0's parameters; the centre starts there.
//  2. After each tau-th step a worker sends its parameters x_i to the centre rank and waits.
//  3. The centre rank handles one worker at a time, in arrival order: d = alpha (x_i - x~),
//     x~ <- x~ + d, and sends d back; the worker sets x_i <- x_i - d. Because the centre
//     applies each exchange whole before the next, every exchange is the elastic update of
//     the paper against the centre as it stands.
//  4. reconcile() (before evaluation and at the end): each worker asks for the centre; once
//     every worker has asked, each receives it and installs it (the model the run stands
//     for), and the workers average their optimizer state.
//  5. finish(): each worker sends stop; the centre rank returns from serve().
//  6. resumed_at(): after a resume, worker 0 sends the centre rank the model the checkpoint
//     holds (the centre as it was saved), since only the workers read the checkpoint.
// A silent centre rank makes its workers fail with a TimeoutError naming it; a silent worker
// does the same to the centre rank.
#pragma once

#include <memory>
#include <vector>

#include "distml/comm/communicator.h"
#include "distml/train/strategy.h"

namespace distml::train {

struct AsyncEasgdOptions {
  std::int64_t period = 8;  // tau
  double alpha = 0.1;
};

class AsyncEasgdStrategy final : public Strategy {
 public:
  /// Collective over `world` (splits off the workers). ConfigError for fewer than 2 ranks.
  AsyncEasgdStrategy(comm::Communicator& world, AsyncEasgdOptions options);
  ~AsyncEasgdStrategy() override;

  void setup(const nn::ModelTensors& model) override;
  void before_backward(bool) override {}
  void before_optimizer_step() override {}
  void after_optimizer_step(torch::optim::Optimizer& optimizer, std::int64_t step) override;
  void resumed_at(std::int64_t global_step) override;
  void reconcile(torch::optim::Optimizer& optimizer) override;
  comm::Communicator* training_comm() override { return workers_.get(); }
  bool trains() const override { return world_.rank() < centre_rank_; }
  void serve() override;
  void finish() override;
  StrategyStats stats() const override { return stats_; }

 private:
  void send_control(double word);
  torch::Tensor flat_parameters() const;
  void set_parameters(const torch::Tensor& flat);

  comm::Communicator& world_;
  AsyncEasgdOptions options_;
  int centre_rank_;
  std::unique_ptr<comm::Communicator> workers_;  // null on the centre rank
  std::vector<torch::Tensor> params_;
  torch::Tensor exchange_;  // a worker's parameters out, the elastic difference back
  double control_ = 0;
  StrategyStats stats_;
};

}  // namespace distml::train
