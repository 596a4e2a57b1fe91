// Parameter server (DistBelief's Downpour SGD; ps-lite / BytePS style): the last
// strategy.servers ranks hold the parameters and the optimizer state, the other ranks are
// workers that compute gradients on their shards of the data.
//
// The protocol, step by step:
//  1. setup() gives every rank rank 0's parameters (all ranks build the model) and cuts the
//     parameters into buckets in reverse order (bucket_planner.h), each owned by the server
//     with the fewest bytes so far: shards balanced by bytes. The layout follows from the
//     shapes, so every rank derives the same one without sending it. Workers train on a
//     communicator of their own (the data is sharded over the workers only).
//  2. During backward a hook per parameter copies its gradient into its bucket; when a bucket
//     is complete the worker pushes it to its server (isend on the bucket's tag) and posts the
//     receive for the bucket's fresh parameters: pushes overlap the rest of backward.
//  3. After backward the worker sends each server the step header {clock, learning rate}
//     and waits for every bucket's parameters (the pull), which it copies into the model.
//     The worker's own optimizer never steps: the servers apply the update.
//  4. A server (ps_server.h, on its own rank's thread) keeps a receive posted for every
//     worker's header and buckets and polls them. A worker's step is complete when its header
//     and all of this server's buckets are in. Then, by strategy.mode:
//       bsp: once every worker's step is complete, one optimizer step on the average of their
//            gradients, and every worker gets the result: synchronous SGD.
//       asp: each complete step is applied at once, as gradient / workers, and that worker
//            gets the current parameters straight away.
//       ssp: as asp, but the answer to a worker at clock c (steps applied) is held back while
//            the slowest running worker is below c - strategy.staleness: no worker gets
//            more than s steps ahead.
//     Staleness (updates applied between a worker's pull and its next push) is counted per
//     update in a histogram.
//  5. reconcile() (before evaluation and at the end): each worker sends sync; when every
//     running worker has, each gets the current parameters, so all replicas agree.
//  6. finish(): each worker sends stop; a server returns from serve() once every worker has
//     stopped; then all ranks sum the servers' staleness histograms (rank 0 reports them).
//  7. Checkpoints: after the sync of 5., worker 0 asks every server for its optimizer state
//     (save) and keeps it with its own state in the checkpoint; the parameters are the
//     workers' model. After a resume worker 0 sends each server the checkpoint's parameters
//     and its optimizer state before anyone trains (resumed_at()), since servers read no file.
// With compress.name set, a worker pushes each bucket compressed (compressor.h: pack, with
// error feedback kept on the worker) and the server decodes each worker's push on its own
// before 4.; the pulled parameters travel as they are.
// A silent server (dead, or stuck) makes the waiting workers fail with a TimeoutError naming
// it after the communicator's timeout; a silent worker does the same to the servers.
#pragma once

#include <array>
#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "distml/comm/communicator.h"
#include "distml/train/compress/compressor.h"
#include "distml/train/strategies/gradient_buckets.h"
#include "distml/train/strategies/ps_protocol.h"
#include "distml/train/strategies/ps_server.h"
#include "distml/train/strategy.h"

namespace distml::train {

struct PsStrategyOptions {
  int servers = 1;
  ps::ServerOptions server;
  std::size_t first_bucket_bytes = 1u << 20;
  std::size_t bucket_bytes = 4u << 20;
  bool find_unused_parameters = false;
  compress::CompressOptions compress;
};

class PsStrategy final : public Strategy {
 public:
  /// Collective over `world` (splits off the workers' communicator). ConfigError when
  /// `servers` leaves no worker.
  PsStrategy(comm::Communicator& world, PsStrategyOptions options);
  ~PsStrategy() override;

  void setup(const nn::ModelTensors& model) override;
  void before_backward(bool sync) override { buckets_->set_sync(sync); }
  void before_optimizer_step() override;
  void optimizer_step(torch::optim::Optimizer& optimizer) override;
  void reconcile(torch::optim::Optimizer& optimizer) override;
  std::string save_state() override;
  void load_state(const std::string& state) override;
  void resumed_at(std::int64_t global_step) override;
  comm::Communicator* training_comm() override { return workers_.get(); }
  bool trains() const override { return world_.rank() < layout_.workers; }
  void serve() override;
  void finish() override;
  StrategyStats stats() const override { return stats_; }
  nlohmann::json report() const override;

 private:
  struct Exchange;
  void push(std::size_t bucket);
  void wait_for_parameters();

  comm::Communicator& world_;
  PsStrategyOptions options_;
  ps::Layout layout_;
  std::unique_ptr<comm::Communicator> workers_;  // null on a server
  std::unique_ptr<ps::Server> server_;           // on a server only (after setup)
  std::vector<torch::Tensor> params_;            // every trainable parameter, in order
  std::string saved_state_;                   // from a checkpoint: compressor, servers (worker 0)
  std::unique_ptr<GradientBuckets> buckets_;  // on a worker only (after setup)
  std::unique_ptr<compress::Compressor> compressor_;  // pack on a worker, unpack on a server
  std::vector<Exchange> exchanges_;                   // per bucket
  std::vector<std::array<double, 2>> headers_;        // per server: the step header in flight
  std::vector<comm::Work> header_work_;
  std::int64_t clock_ = 0;
  std::size_t pushes_this_step_ = 0, early_pushes_ = 0;
  std::chrono::steady_clock::time_point first_push_, last_push_, backward_end_;
  StrategyStats stats_;
  ps::ServerReport summed_;  // rank 0, after finish()
};

}  // namespace distml::train
