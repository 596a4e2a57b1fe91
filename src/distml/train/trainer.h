// The training loop every strategy runs in: epochs or a step budget over sharded, prefetched
// batches; gradient accumulation; learning-rate schedule; evaluation with metrics reduced
// across ranks; checkpoints that resume exactly; export of the final weights.
//
// One step, on every rank:
//  1. The loader hands over this rank's block of the step's global window (sharded_sampler.h),
//     batch_size x accumulate samples, cut into `accumulate` micro-batches.
//  2. For each micro-batch: strategy.before_backward(last micro-batch?), forward, loss /
//     accumulate, backward (the strategy's hooks communicate during it).
//  3. strategy.before_optimizer_step() leaves the averaged gradients in .grad();
//     strategy.optimizer_step() applies the update with the scheduled learning rate (a plain
//     optimizer step, or ZeRO's sharded one); strategy.after_optimizer_step() averages models
//     where the strategy does that (local SGD, EASGD, gossip). With train.slow_rank = R, rank
//     R sleeps (slow_factor - 1) x its forward/backward time first: a straggler (in a pipeline
//     after each of its stage's forwards and backwards, pipeline_stage.h).
//  4. Every log_every steps the mean loss is averaged across ranks and reported; at the end of
//     an epoch (or every eval_every steps) the test split is evaluated; every
//     checkpoint_every steps rank 0 writes a checkpoint (the newest
//     train.keep_checkpoints are kept, checkpoint_dir.h).
//
// BatchNorm: each rank normalises with its own batch's statistics during training (as PyTorch
// DDP does by default, and as the single-process reference would with batch_size samples);
// the running statistics, which differ between ranks, are averaged across ranks before every
// evaluation, checkpoint and export, so that all ranks evaluate and save the same model. The
// strategy's reconcile() runs at the same points, for strategies whose replicas drift apart
// (local SGD, gossip, EASGD): evaluations and checkpoints see the consensus model.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "distml/comm/communicator.h"
#include "distml/core/timeline.h"
#include "distml/nn/model_registry.h"
#include "distml/train/checkpoint_contents.h"  // WorldChange
#include "distml/train/checkpoint_owner.h"     // Arrival
#include "distml/train/config.h"
#include "distml/train/objective.h"
#include "distml/train/task_data.h"

namespace distml::train {

struct TrainResult {
  EvalMetrics test;
  std::int64_t steps = 0;        // optimizer steps taken by this run (after a resume: since it)
  std::int64_t global_step = 0;  // optimizer steps since the start of training
  double steps_per_sec = 0;      // over the training loop only: no start-up, evaluation, checkpoint
  double samples_per_sec = 0;    // global: steps_per_sec x batch x accumulate x world size
  double comm_time_s = 0;        // all-reduce time, launch to completion, summed over steps
  double overlap_fraction = 0;   // the share of comm_time_s that ran while backward still did
                                 // (StrategyStats::overlapped_seconds)
  std::int64_t early_bucket_launches = 0;  // reductions started while backward still ran
  std::size_t bytes_sent = 0;              // this rank's model payload sent (StrategyStats)
  double consensus_distance = 0;           // replica spread at the last reconcile (StrategyStats)
  std::size_t optimizer_state_bytes = 0;   // optimizer state this rank holds at the end
  nlohmann::json strategy_report = nlohmann::json::object();  // Strategy::report()
  std::uint64_t param_checksum = 0;  // the same on every rank, else the run fails
  double wall_s = 0;
};

/// Where a run resumed: the checkpoint file and its step.
struct ResumePoint {
  std::string path;
  std::int64_t global_step = 0;
  int saved_world_size = 0;  // the ranks that wrote it: more than this run's after a shrink
};

/// Receives rank 0's events: {"event": "step" | "eval" | "checkpoint", ...} as JSON objects.
using EventSink = std::function<void(const nlohmann::json&)>;
/// Called on rank 0 after every step with (global step, total steps).
using ProgressSink = std::function<void(std::int64_t, std::int64_t)>;

class Trainer {
 public:
  /// Builds the model (seeded by train.seed), optimizer and strategy, and checks with the
  /// other ranks that they run the same configuration (ConfigError naming the ranks that
  /// differ). `data` is shared, read-only, and must outlive the trainer.
  Trainer(const TrainConfig& config, comm::Communicator& comm, const TaskData& data);
  ~Trainer();

  /// Continues from the newest whole checkpoint in `dir` (of the run that owns it, where it
  /// wrote one), skipping damaged newer ones with a warning (CheckpointError when there is none, or
  /// it was written by a run whose model, data, batch or world size differ; another world size is
  /// taken with WorldChange::elastic, as after an elastic restart). Returns the file and the step
  /// it resumed at.
  ResumePoint resume(const std::string& dir, WorldChange change = WorldChange::refuse);
  /// As resume(), from the newest checkpoint in `dir` that this run wrote (this_run_id(), as
  /// rank 0 sees it; after a restart); nullopt when it wrote none.
  std::optional<ResumePoint> resume_own(const std::string& dir,
                                        WorldChange change = WorldChange::refuse);

  /// Collective: claims train.checkpoint_dir for this run, when one is set (checkpoint_owner.h):
  /// a resuming run goes on as the folder's run. UsageError on rank 0, a CheckpointError on the
  /// others, when a fresh run finds another run's checkpoints there.
  void claim_checkpoint_dir(Arrival arrival);

  TrainResult run(const EventSink& on_event = {}, const ProgressSink& on_progress = {});

  /// Before run(): records this rank's spans into `timeline` (null: none): each step with its
  /// data wait, forward, backward, gradient sync and optimizer step, evaluations and
  /// checkpoints, and the strategy's own communication (Strategy::record_into).
  void record_into(Timeline* timeline);

  /// Evaluates the current model on the test split (collective).
  EvalMetrics evaluate();

  /// The model. With pipeline stages a rank holds only its own stage's tensors (the others'
  /// are empty), until the end of run() gathers the whole model on rank 0 for the export.
  /// Under ZeRO stage 3 its parameters hold values only while gathered (for a checkpoint or
  /// an export): read them with parameter_values().
  nn::Model& model();
  /// Collective: copies of model()'s parameters, in order (ZeRO stage 3: read one layer at a
  /// time, never the whole model at once).
  std::vector<torch::Tensor> parameter_values();

 private:
  ResumePoint resume_written_by(const std::string& dir, WorldChange change,
                                const std::string& run_id);
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace distml::train
