// One rank's stage of a synchronous pipeline (GPipe or 1F1B, schedule.h): it runs its layers
// on the step's micro-batches in the schedule's order, passing activations forward and their
// gradients back through StageLink, and leaves in .grad() of its own parameters the gradient
// of the whole batch's mean loss, the same as one pass of the whole model over the batch.
//
// The protocol, step by step:
//  1. The batch of `rows` samples is cut into m = min(micro_batches, rows) micro-batches whose
//     sizes differ by at most one (the first rows % m have one more), the same on every stage.
//  2. Forward of micro-batch i: stage 0 slices its input from the batch; another stage
//     receives it from the stage before (tag i) and asks for its gradient. The stage's layers
//     run on it; the output goes to the next stage (tag i), or, on the last stage, into the
//     loss: the micro-batch's mean loss weighted by its share of the batch (count / rows), so
//     that the weighted losses add up to the batch's mean loss whatever the sizes.
//     With recompute, the forward runs without autograd and keeps only the input (and the
//     generator state, so that dropout draws the same masks again). The stage draws from a
//     generator state of its own (generator_state.h), so that stages that are threads of one
//     process neither share nor disturb each other's streams.
//  3. Backward of micro-batch i: the last stage back-propagates its weighted loss; another
//     stage receives the gradient of its output from the next stage (tag i) and
//     back-propagates it. With recompute the forward runs again first, with autograd, and the
//     layers' buffers are put back afterwards, so BatchNorm's running statistics move once per
//     micro-batch as without recompute. The input's gradient goes to the stage before.
//     `before_backward(last)` runs before each backward, with last = true on this stage's last
//     backward of the step, so a data-parallel strategy over the stage's replicas can
//     accumulate the earlier ones and communicate during the last (strategy.h).
//  4. BatchNorm normalises each micro-batch by its own statistics (as torchgpipe does without
//     deferred batch norm), so with BatchNorm and m > 1 the gradients are those of m smaller
//     batches, not of the whole batch.
//  5. The step ends when every send has completed. The batch's loss is known on the last
//     stage only; the trainer takes it from there when it reports.
// The pipedream schedule (asynchronous 1F1B) differs in three ways: each micro-batch's loss
// counts whole (its mean: it is an update of its own); after each backward `update` runs (the
// strategy and the optimizer step), so later forwards see newer weights; and the weights each
// micro-batch runs with are managed by WeightVersions (PipeDream's stashing, or SpecTrain's
// prediction), with the forward re-computed in the backward.
// The ddg schedule (decoupled parallel back-propagation; Huo et al. 2018) runs one whole batch
// per step and lets the backward lag, so that the stages' backwards run in parallel instead
// of one after the other. With S stages, stage s's delay is d = S - 1 - s steps:
//  1. Step t's batch goes forward through every stage, as above, without autograd: each
//     stage keeps its input and stashes the weights it ran with (WeightVersions), and the
//     last stage computes its loss.
//  2. The last stage back-propagates batch t at once; stage s < S - 1 back-propagates batch
//     t - d with the gradient that stage s + 1 sent in step t - 1, re-computing the batch's
//     forward on its stashed weights. So every stage's gradient for a batch is the gradient at
//     the weights the batch's forward met, DDG's rule w_s <- w_s - lr grad_s f(x_{t-d}; w_{t-d}).
//  3. `update` runs after each backward; stage s has nothing to apply in its first d steps.
//     The input's gradient goes to stage s - 1, which takes it in its next step: the end of a
//     step waits for this step's activations to arrive, not for that gradient.
//  4. drain() back-propagates and applies the d batches still held when the run ends.
// A stage waits only for its input and its delayed gradient, never for the whole pipeline; it
// holds d + 1 batches' inputs and d stashed copies of its weights.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <list>
#include <string>
#include <vector>

#include "distml/comm/communicator.h"
#include "distml/core/clock.h"
#include "distml/core/error.h"
#include "distml/nn/layers.h"
#include "distml/train/pipeline/stage_link.h"
#include "distml/train/pipeline/weight_versions.h"

namespace distml::train::pipeline {

struct PipelineOptions {
  std::string schedule = "1f1b";  // gpipe, 1f1b, pipedream or ddg
  int micro_batches = 4;
  bool recompute = false;        // gpipe's and 1f1b's activation re-computation
  VelocityFn spectrain{};        // pipedream: predict the weights from it instead of stashing them
  bool log_weight_uses = false;  // pipedream: keep WeightVersions::uses(), for tests
  /// Draw from a random stream of the stage's own (dropout; see step 2 of the protocol). Off
  /// for tensor-parallel layers, whose forward all-reduces across ranks (holding the stream
  /// would block the other ranks of a process) and which draw nothing: only the built-in
  /// mlp's and LeNet-5's Linear pairs are split.
  bool own_random_stream = true;
  bool bf16 = false;  // train.precision = "bf16": the layers' forward under autocast
  std::function<int(int stage)> world_rank = [](int s) { return s; };  // for messages
  /// Straggler experiments (train.slow_rank): each forward and backward takes this many times
  /// as long, the stage sleeping the difference after it computes, as a slower rank would.
  double slowdown = 1;
};

/// What one step cost this stage.
struct StageStats {
  double compute_seconds = 0;  // its layers' forwards and backwards (and the loss)
  double wait_seconds = 0;     // blocked on a neighbour: the bubble, plus transfer time
  std::size_t bytes_sent = 0;
  int peak_micro_batches = 0;              // most micro-batches whose activations it held
  std::int64_t peak_activation_bytes = 0;  // their inputs and outputs then (the tensors at the
                                           // stage's edges, not autograd's intermediates)
};

/// Adds one step's stats to a run's totals (the peaks: the larger).
void accumulate(StageStats& totals, const StageStats& step);

class PipelineStage {
 public:
  /// `comm` has one rank per stage, rank s being stage s; `layers` are this stage's, and
  /// `tensors` their parameters and buffers (nn::select_modules()).
  PipelineStage(comm::Communicator& comm, std::vector<nn::Layer> layers,
                const nn::ModelTensors& tensors, PipelineOptions options);
  ~PipelineStage();  // where InFlight is complete

  /// The mean loss of rows [begin, begin + count) of the batch, from the last layer's output.
  using LossFn = std::function<torch::Tensor(const torch::Tensor& output, std::int64_t begin,
                                             std::int64_t count)>;
  /// One step's forwards and backwards over a batch of `rows` samples. Stage 0 takes `input`
  /// (the whole batch, rows first), the last stage `loss`; other stages may pass empty ones.
  /// Returns the batch's mean loss on the last stage, 0 on the others. `update` runs after
  /// each backward under pipedream and ddg (and never otherwise).
  double step(const torch::Tensor& input, std::int64_t rows, const LossFn& loss,
              const std::function<void(bool last)>& before_backward,
              const std::function<void()>& update = {});
  /// ddg, at the end of a run: the held batches' delayed backwards and updates (step 4).
  /// Does nothing under the other schedules, whose steps leave nothing behind.
  void drain(const std::function<void(bool last)>& before_backward,
             const std::function<void()>& update);

  const StageStats& stats() const { return stats_; }
  /// The state of the stage's own random stream (dropout's), for checkpoints; it starts as the
  /// default generator's when the stage is built.
  const std::string& random_state() const { return rng_; }
  void set_random_state(const std::string& state) { rng_ = state; }
  /// Under pipedream and ddg: the weights each micro-batch ran with; otherwise null.
  const WeightVersions* weight_versions() const { return versions_.get(); }
  /// Whether the stage runs `update` itself (pipedream, ddg).
  bool asynchronous() const { return versions_ != nullptr; }
  int stage() const { return stage_; }
  int stages() const { return stages_; }

 private:
  struct InFlight;  // what a micro-batch's forward leaves for its backward
  double decoupled_step(const torch::Tensor& input, std::int64_t rows, const LossFn& loss,
                        const std::function<void(bool)>& before_backward,
                        const std::function<void()>& update);
  void forward(InFlight& f, const torch::Tensor& input, std::int64_t rows, const LossFn& loss);
  void backward(InFlight& f, bool last, std::int64_t rows, const LossFn& loss,
                const std::function<void(bool)>& before_backward,
                const std::function<void()>& update);
  torch::Tensor compute(const InFlight& f, std::int64_t rows, const LossFn& loss);
  torch::Tensor receive(int peer, const InFlight& f, const char* what);
  void end_step(bool all_sends);
  void straggle(Clock::time_point compute_start) const;
  [[noreturn]] void rethrow_naming(const CommError& e, const std::string& waiting) const;
  bool is_last() const { return stage_ == stages_ - 1; }
  bool decoupled() const { return options_.schedule == "ddg"; }
  bool recomputes() const { return options_.recompute || asynchronous(); }
  // ddg's batches are numbered by step and alternate between two tags: at most two of a
  // stage's sends to a neighbour are in flight at once.
  int tag(const InFlight& f) const;

  comm::Communicator& comm_;
  std::vector<nn::Layer> layers_;
  std::vector<torch::Tensor> buffers_;  // the layers' buffers (BatchNorm), for recompute
  PipelineOptions options_;
  int stage_, stages_;
  StageLink link_;
  StageStats stats_;
  std::unique_ptr<WeightVersions> versions_;  // pipedream, ddg
  std::list<InFlight> held_;                  // ddg: the batches whose backward is to come
  int steps_ = 0;                             // ddg: steps run, the next batch's number
  std::string rng_;                           // the stage's random stream
};

}  // namespace distml::train::pipeline
