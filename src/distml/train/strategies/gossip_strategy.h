// Decentralised parallel SGD (D-PSGD, Lian et al. 2017): no global collective in a training
// step; each rank exchanges its parameters with a few neighbours and mixes them,
//    x_i <- sum_j W_ij x_j + (the update the optimizer computed at x_i),
// where W is a doubly stochastic mixing matrix given by the topology.
//
// The protocol, step by step:
//  1. setup() gives every rank rank 0's parameters and buffers. The topology is a list of
//     offsets d: rank r sends to r + d and receives from r - d (mod N), with the uniform
//     weight 1 / (1 + offsets) for itself and each sender:
//       ring         d = +1, -1 (1/3 each); with 2 ranks the one neighbour, 1/2
//       exponential  d = 2^k for every 2^k < N (Assran et al.'s one-peer-per-hop graph, all hops)
//       complete     d = 1 .. N-1 (1/N each: the all-reduce average, over point-to-point)
//  2. before_backward(sync = true), the last micro-step's: copy the flat parameters x_i
//     (they do not change during forward and backward) and start a non-blocking send of the
//     copy to every out-neighbour and a receive from every in-neighbour, tag kTag + the
//     offset's index, so the exchange overlaps forward and backward.
//  3. The optimizer steps locally.
//  4. after_optimizer_step() waits for every send and receive (each wait times out), then
//     x_i <- w x_i + sum_d w x_{i-d} + (x_i after the step - x_i before it).
//  5. reconcile() averages the parameters (measuring the consensus distance first) and the
//     optimizer state with all-reduces: it runs only for evaluations, checkpoints and at the
//     end.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "distml/comm/communicator.h"
#include "distml/train/strategies/gossip_topology.h"
#include "distml/train/strategy.h"

namespace distml::train {

class GossipStrategy final : public Strategy {
 public:
  GossipStrategy(comm::Communicator& comm, GossipTopology topology = GossipTopology::ring);
  ~GossipStrategy() override;

  void setup(const nn::ModelTensors& model) override;
  void before_backward(bool sync) override;
  void before_optimizer_step() override {}
  void after_optimizer_step(torch::optim::Optimizer& optimizer, std::int64_t step) override;
  void reconcile(torch::optim::Optimizer& optimizer) override;
  StrategyStats stats() const override { return stats_; }

  static constexpr int kTag = 0x6055;  // + the offset's index

 private:
  void wait_all();

  comm::Communicator& comm_;
  std::vector<int> offsets_;
  std::vector<torch::Tensor> params_;
  torch::Tensor sent_;                   // x_i before this step, being sent
  std::vector<torch::Tensor> received_;  // one per offset
  std::vector<comm::Work> works_;
  std::chrono::steady_clock::time_point launch_;
  bool apart_ = false;  // a step since the last reconcile
  StrategyStats stats_;
};

}  // namespace distml::train
