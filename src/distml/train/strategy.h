// How replicas of a model stay consistent: the hooks a trainer calls around each step.
// Strategies (all-reduce, local SGD, gossip, ZeRO, ...) implement it, one per file in
// strategies/; strategy_factory.h builds the one a config names.
//
// The trainer's step, with the hooks in order:
//   before_backward(sync) ... forward, backward ...   (once per micro-batch)
//   before_optimizer_step()                           (.grad() now holds what to apply)
//   clip_gradients(max_norm, parameters)              (with train.clip_grad_norm > 0)
//   optimizer_step(optimizer)                         (the update; default: optimizer.step())
//   after_optimizer_step(optimizer, step)             (model averaging, gossip, elastic pull)
// and reconcile(optimizer) before every evaluation, checkpoint and the end of training, then
// finish() once. Ranks that do not train (parameter servers) call serve() instead.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "distml/comm/communicator.h"
#include "distml/core/timeline.h"
#include "distml/nn/model_registry.h"
#include "distml/nn/model_tensors.h"

namespace distml::train {

/// What a strategy reports about its communication.
struct StrategyStats {
  std::size_t bytes_sent = 0;      // payload bytes of model data this rank sent, in total (the
                                   // tensors handed to collectives or sends, not wire traffic)
  double comm_seconds = 0;         // last step: from the first launch to the last completion
  double exposed_seconds = 0;      // last step: the part the step waited for after backward
  double overlapped_seconds = 0;   // last step: the part that ran while backward still produced
                                   // gradients: from the first launch to the launch of the last
                                   // bucket that a gradient hook completed (0 with one bucket)
  std::size_t early_launches = 0;  // last step: reductions started while backward still ran
  double consensus_distance = 0;   // at the last reconcile() after a training step, before it
                                   // took effect: sqrt(mean over ranks of ||x_r - x||^2), x the
                                   // model it installed (the average; EASGD's centre). 0 where
                                   // replicas never differ (allreduce)
  std::size_t optimizer_state_bytes = 0;  // optimizer state (momentum, Adam moments) the strategy
                                          // holds itself, ZeRO's shard; TrainResult adds what
                                          // the trainer's optimizer holds
  double overlapped_fraction() const {
    return comm_seconds > 0 ? overlapped_seconds / comm_seconds : 0.0;
  }
};

class Strategy {
 public:
  virtual ~Strategy() = default;
  /// Before the model is built: what its build tells about each layer as it is made, its
  /// parameters in their final dtype (nn::LayerBuilt); empty where the whole model is needed.
  /// ZeRO stage 3 keeps this rank's block of each layer and frees the layer at once.
  virtual nn::LayerBuilt on_layer_built() { return {}; }
  /// Once, before setup(): the model itself. A strategy that runs the model's forward takes
  /// it over here (ZeRO stage 3 gathers each layer's parameters just before it runs).
  virtual void attach(nn::Model& /*model*/) {}
  /// Collective, once before training: makes every replica start from the same state.
  virtual void setup(const nn::ModelTensors& model) = 0;
  /// Called before each backward; `sync` is false on the micro-steps of gradient
  /// accumulation that must not communicate.
  virtual void before_backward(bool sync) = 0;
  /// Called after the last backward of a step: on return, every .grad() holds the gradient
  /// the update applies (ZeRO stage 2: the strategy holds this rank's shard of it instead).
  virtual void before_optimizer_step() = 0;
  /// Scales the gradients the update will apply so that their global 2-norm is at most
  /// `max_norm` (torch.nn.utils.clip_grad_norm_). The default clips the parameters' .grad(),
  /// which hold the averaged gradient (every rank clips alike) or, for strategies that step on
  /// their own gradients, this replica's (as one process would). Strategies that hold the
  /// gradient in shards compute the norm across ranks.
  virtual void clip_gradients(double max_norm, const std::vector<torch::Tensor>& parameters) {
    torch::nn::utils::clip_grad_norm_(parameters, max_norm);
  }
  /// Applies the update.
  virtual void optimizer_step(torch::optim::Optimizer& optimizer) { optimizer.step(); }
  /// Collective, at a checkpoint: what this rank's strategy holds beyond the model and the
  /// trainer's optimizer (ZeRO's optimizer shard), serialised; empty where there is nothing.
  virtual std::string save_state() { return {}; }
  /// At a resume, before the first step: what save_state() returned on this rank.
  virtual void load_state(const std::string& /*state*/) {}
  /// At a resume on another number of ranks than wrote the checkpoint (an elastic restart),
  /// instead of load_state(): what save_state() returned on each of them. Rank `rank` takes
  /// its namesake's by default, and a rank new to the run (the world grew) starts afresh, as
  /// at a first start (a compressor's residual: none yet); a strategy whose state is cut by the
  /// number of ranks cuts it again.
  virtual void load_resharded_state(const std::vector<std::string>& saved, int rank) {
    if (static_cast<std::size_t>(rank) < saved.size())
      load_state(saved[static_cast<std::size_t>(rank)]);
  }
  /// Called after a resume from a checkpoint: the next step is `global_step` + 1. Collective
  /// over every rank; a rank that does not train reads no checkpoint (global_step 0 there).
  virtual void resumed_at(std::int64_t /*global_step*/) {}
  /// Called after the update of step `step` (1 for the first step of training).
  virtual void after_optimizer_step(torch::optim::Optimizer& /*optimizer*/, std::int64_t /*step*/) {
  }
  /// Collective: on return every replica holds the one model (and optimizer state) the run
  /// stands for (the average for local SGD and gossip, the centre for EASGD), so it can be
  /// evaluated, saved and compared. A no-op where replicas never diverge.
  virtual void reconcile(torch::optim::Optimizer& /*optimizer*/) {}
  /// Collective: every parameter's values in the model, before the trainer reads or writes it
  /// outside a step. A no-op where they always are; ZeRO stage 3 holds them in shards between
  /// steps.
  virtual void gather_model() {}
  /// True where the model's parameters hold no values between steps (ZeRO stage 3): the
  /// trainer reads them only after gather_model() or through read_parameters_in_turn(), and an
  /// evaluation (whose forward gathers each layer as it runs) leaves them as they were.
  virtual bool shards_parameters() const { return false; }
  /// Collective: read(i) for each of `parameters` (the model's, in order), each while its
  /// values are in the model. ZeRO stage 3 gathers a layer for its parameters and frees it
  /// after: the whole model is never held at once.
  virtual void read_parameters_in_turn(const std::vector<torch::Tensor>& parameters,
                                       const std::function<void(std::size_t)>& read) {
    for (std::size_t i = 0; i < parameters.size(); ++i) read(i);
  }
  /// Collective, before a mid-run evaluation: reconcile() for a moment. The trainer puts every
  /// replica's own parameters, buffers and optimizer state back afterwards, so the strategy
  /// must leave what its next average starts from (local SGD's anchor) as it was: how often a
  /// run evaluates must not change its trajectory.
  virtual void reconcile_for_evaluation(torch::optim::Optimizer& optimizer) {
    reconcile(optimizer);
  }
  /// The ranks that train, as a communicator of their own; null (the default) for all ranks.
  /// The trainer shards the data over it and runs its own collectives (loss, evaluation,
  /// checks) on it: a parameter server's workers train, its servers do not.
  virtual comm::Communicator* training_comm() { return nullptr; }
  /// False on a rank that does not train (a server): it calls serve() instead of training.
  virtual bool trains() const { return true; }
  /// A non-training rank's work; returns once every training rank has called finish().
  virtual void serve() {}
  /// Called on every training rank after the last reconcile() of the run.
  virtual void finish() {}
  virtual StrategyStats stats() const = 0;
  /// After setup(): records the strategy's own communication (each bucket's all-reduce on a
  /// lane of its own, waits on the "main" lane) into `timeline`; null stops. Strategies whose
  /// communication the trainer's spans already show record nothing of their own.
  virtual void record_into(Timeline* /*timeline*/) {}
  /// Strategy-specific results for the end of the run (rank 0's done line), as JSON fields.
  virtual nlohmann::json report() const { return nlohmann::json::object(); }
};

}  // namespace distml::train
