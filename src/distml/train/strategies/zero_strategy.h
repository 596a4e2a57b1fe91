// ZeRO (Rajbhandari et al. 2020), stages 1, 2 and 3: synchronous data parallelism in which each
// rank keeps the optimizer state (stage 1), also the averaged gradients (stage 2), and also the
// parameters between uses (stage 3) of only its 1/N of the parameters. Stages 1 and 2
// all-gather the updated parameters after every step; stage 3 gathers each layer just before
// its forward and its backward (zero_layers.h), and differs from stage 2 as follows:
//  - buckets are the model's layers (nn::Model::layers(), last first), one per layer with
//    trainable parameters, so that a layer's block of the shard is what its gather needs;
//  - during backward, once a bucket is launched, the earlier buckets' .grad() are released,
//    and those before the one just before it are waited for and their flat buffers freed, so
//    that at most three buckets exist at a time (with train.accumulate, .grad() still
//    accumulates whole gradients over the micro-steps that do not synchronise);
//  - a parameter without a gradient sends zeros (as find_unused_parameters = true): the
//    missing-gradient flag of stages 1 and 2 rides on the step's all-gather, which stage 3
//    does not have;
//  - after the update nothing is gathered: the next forward gathers layer by layer;
//  - a built-in model (mlp, lenet5) is sharded as it is built (on_layer_built): each layer,
//    once its weights are drawn, keeps this rank's block and frees the rest, so no rank ever
//    holds the whole model; other models are built whole, and their parameters' first storage
//    goes back to the system as setup moves each layer. What the first step freed (the whole
//    layers the first forward started from) goes back after it; from setup on, blocks of
//    8 MiB and more are returned at free (mapped_memory.h);
//  - evaluations and the final checksum read the model layer by layer; a checkpoint and an
//    export gather it whole.
//
// The protocol, step by step:
//  1. setup() starts every replica from rank 0's model (replicas.h) and cuts the parameters
//     into the all-reduce strategy's buckets (bucket_planner.h). A bucket of n elements is
//     padded to N equal blocks of ceil(n / N) elements, and rank r owns block r of every
//     bucket; its shard is one flat tensor, its block of bucket 0, then of bucket 1, ... So
//     every rank owns 1/N of the parameters (to within N - 1 padding elements a bucket), however
//     unevenly the tensors are sized, and no world size is too large: a block may hold padding
//     only.
//  2. During backward a hook on each parameter copies its gradient, plus whatever .grad()
//     holds from earlier micro-steps, into its bucket's flat buffer (allocated for the step).
//     Complete buckets are launched in plan order, as in allreduce_strategy.h, as an
//     asynchronous collective (avg) that overlaps the rest of backward: stage 1 all-reduces
//     the bucket; stage 2 reduce-scatters it, so that each rank receives its block only,
//     straight into the shard's gradient.
//  3. before_optimizer_step() sends what parameters without a gradient hold, waits for every
//     bucket, then: stage 1 copies the averages into every .grad(), so the whole averaged
//     gradient stays visible, and its own blocks into the shard's gradient; stage 2 releases
//     every .grad(): this rank's share of the gradient lives in the shard only. The flat buffers
//     are freed. Without find_unused_parameters each bucket carries a flag element, as in
//     allreduce_strategy.h, raised by a rank that sent a stand-in for a missing gradient: stage
//     1 sees it reduced on every rank and fails at once; in stage 2 it lands in one rank's
//     block only, which carries it into the all-gather of step 5, after which every rank fails.
//  4. optimizer_step(optimizer) copies the current values of its blocks from the model into
//     the shard (the model stays the one source of truth) and steps a private optimizer of the
//     same kind over the shard, chunk by chunk (shard_optimizer.h), with the trainer
//     optimizer's options copied at every step (so the learning-rate schedule reaches it). The optimizer state (momentum, Adam moments)
//     therefore exists for 1/N of the parameters; the trainer's own optimizer never steps and
//     holds none. SGD, Adam and AdamW update element by element, so a shard follows the
//     trajectory that the whole tensors would.
//  5. The blocks of every bucket are all-gathered (all launched before the first wait) and
//     copied into the parameters: every rank ends the step with the same parameters, bit for
//     bit.
//  6. On micro-steps with before_backward(false) the hooks do nothing: gradients accumulate
//     locally in .grad(), and only the step's last backward communicates.
//
// LibTorch 1.13 has no hook after a gradient is accumulated, so autograd still holds each full
// gradient in .grad() during backward; stage 2 saves the gradient memory a rank holds from the
// end of backward to the next backward. A checkpoint keeps every rank's shard optimizer
// (save_state(), gathered by the trainer); a resume at the same world size gives each rank its
// own back. A resume on fewer ranks (an elastic restart, M < N) cuts the state again: each of
// the N saved shard optimizers is loaded over a shard of its old size, and each element's
// state (momentum; Adam's moments) is copied to where the element lies among M blocks, so the
// run goes on as a run of M ranks would from the whole optimizer state (the step count is
// every rank's).
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "distml/comm/communicator.h"
#include "distml/core/fnv1a.h"
#include "distml/nn/model_registry.h"
#include "distml/train/strategies/allreduce_strategy.h"
#include "distml/train/strategies/gradient_buckets.h"
#include "distml/train/strategies/shard_optimizer.h"
#include "distml/train/strategies/zero_layers.h"
#include "distml/train/strategy.h"

namespace distml::train {

struct ZeroStrategyOptions {
  /// 1: shard the optimizer state; 2: shard the averaged gradients too; 3: the parameters too.
  int stage = 1;
  /// Stage 3: start the next layer's all-gather while a layer runs (its forward, and its
  /// backward for the layer below); false gathers each layer only when it is needed.
  bool prefetch = true;
  /// Bucket caps, the all-reduce algorithm of stage 1, and find_unused_parameters: as for the
  /// all-reduce strategy.
  AllreduceStrategyOptions buckets{};
};

class ZeroStrategy final : public Strategy {
 public:
  ZeroStrategy(comm::Communicator& comm, ZeroStrategyOptions options = {});
  ~ZeroStrategy() override;

  /// Stage 3: keeps this rank's block of each layer as the model is built, and frees the rest.
  nn::LayerBuilt on_layer_built() override;
  /// Stage 3: runs the model's forward from now on (zero_layers.h); UsageError for a model
  /// that is not a sequence of layers.
  void attach(nn::Model& model) override;
  void setup(const nn::ModelTensors& model) override;
  void before_backward(bool sync) override;
  void before_optimizer_step() override;
  /// Steps this rank's shard, then all-gathers the parameters. `optimizer` must be an SGD,
  /// Adam or AdamW with one parameter group; it is only read.
  /// The norm of the whole gradient from every rank's shard (one scalar all-reduce); each rank
  /// scales its shard.
  void clip_gradients(double max_norm, const std::vector<torch::Tensor>& parameters) override;
  void optimizer_step(torch::optim::Optimizer& optimizer) override;
  /// Stage 3: every layer gathered into the model (a no-op for stages 1 and 2).
  void gather_model() override;
  bool shards_parameters() const override { return gathered_ != nullptr; }
  void read_parameters_in_turn(const std::vector<torch::Tensor>& parameters,
                               const std::function<void(std::size_t)>& read) override;
  /// Stage 3: the run is over: the optimizer state and the gradient's shard go. The model
  /// stays sharded (gather_model() for a whole one).
  void finish() override;
  /// This rank's shard optimizer (its state: momentum, Adam moments and step counts).
  std::string save_state() override;
  void load_state(const std::string& state) override { saved_state_ = state; }
  /// Every old rank's shard optimizer, cut again into this world's blocks at the first step.
  void load_resharded_state(const std::vector<std::string>& saved, int rank) override;
  StrategyStats stats() const override;
  /// Gradient buckets whose flat buffer exists now (stage 3 keeps at most three during
  /// backward: the one filling, the one reducing, the one before it finishing).
  std::size_t gradient_buffers_held() const { return buckets_ ? buckets_->flats_held() : 0; }

 private:
  struct Shard;
  struct BuiltLayer;
  void keep_block_of(const nn::ModelTensors& layer);
  TrainableParameters check_built_alike(const nn::ModelTensors& model);
  BucketPlan layer_plan(const TrainableParameters& trainable);
  void take_built(ZeroLayers::Unit& unit);
  void start_layers();
  void settle_before(std::size_t bucket);
  void launch_ready_buckets();
  void load_shard_from_model();
  void gather_parameters();
  void load_resharded(torch::optim::Optimizer& like);
  std::int64_t own_flag(std::size_t bucket) const;

  comm::Communicator& comm_;
  ZeroStrategyOptions options_;
  std::unique_ptr<GradientBuckets> buckets_;
  std::vector<Shard> shards_;  // per bucket
  torch::Tensor shard_;        // this rank's block of every bucket; its .grad() too
  std::unique_ptr<ShardOptimizer> shard_optimizer_;  // made at the first step
  std::vector<BuiltLayer> built_;         // stage 3: each layer's block, as built, until setup()
  Fnv1a built_checksum_;                  // ... and the values they were built with
  std::optional<nn::Model> model_;        // stage 3: the model whose forward it runs
  std::vector<nn::Layer> layers_;         // ... and its layers, until setup()
  std::vector<int> unit_of_layer_;        // ... each one's bucket (-1: none)
  std::unique_ptr<ZeroLayers> gathered_;  // ... which gathers them
  std::size_t grads_released_ = 0;        // stage 3: buckets whose .grad() are released ...
  std::size_t flats_released_ = 0;        // ... and whose flat buffers are, this step
  bool trimmed_ = false;                  // stage 3: the memory freed by its first step given back
  std::string saved_state_;  // from a checkpoint, for the shard optimizer once it is made
  std::vector<std::string> resharded_;  // ... or every rank's, from a checkpoint of more ranks
  std::string missing_here_;            // a parameter without gradient on this rank this step
  std::size_t next_launch_ = 0;
  std::size_t early_launches_ = 0;  // this step's launches before every gradient had arrived
  std::chrono::steady_clock::time_point first_launch_, last_launch_;
  StrategyStats stats_;
};

}  // namespace distml::train
