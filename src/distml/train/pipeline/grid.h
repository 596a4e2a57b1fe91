// Where a rank stands when the model is split: the grid of ranks (data replicas x pipeline
// stages x tensor-parallel ranks), and the part of the model that its stage runs.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <span>
#include <vector>

#include "distml/comm/communicator.h"
#include "distml/nn/model_registry.h"
#include "distml/train/pipeline/pipeline_stage.h"

namespace distml::train::pipeline {

/// The world as `replicas` pipelines of `stages` stages, each stage on `tensor_ranks` ranks:
/// rank = (replica x stages + stage) x tensor_ranks + tensor_rank. The tensor ranks, which
/// talk most, are neighbours, then a pipeline's stages (on one host, when hosts hold
/// consecutive ranks).
struct Grid {
  int replicas = 1, stages = 1, tensor_ranks = 1;
  int replica = 0, stage = 0, tensor_rank = 0;
  std::unique_ptr<comm::Communicator> pipeline;  // this replica's stages (at this tensor rank);
                                                 // its rank = stage
  std::unique_ptr<comm::Communicator> peers;     // this stage and tensor rank in every
                                                 // replica; rank = replica
  std::unique_ptr<comm::Communicator> tensor;    // this stage's tensor ranks; rank = tensor_rank
  /// The world rank of `stage` in this rank's pipeline, for messages.
  int world_rank_of_stage(int s) const {
    return (replica * stages + s) * tensor_ranks + tensor_rank;
  }
};

/// Collective over `world`, whose size must be a multiple of stages x tensor_ranks.
Grid make_grid(comm::Communicator& world, int stages, int tensor_ranks = 1);

/// One stage's part of a model.
struct StageOfModel {
  int stage = 0;
  std::vector<nn::Layer> layers;         // this stage's, in order
  nn::ModelTensors own;                  // their parameters and buffers
  std::vector<nn::ModelTensors> stages;  // every stage's
  std::vector<int> layer_counts;         // layers per stage
  /// The other stages' tensors' shapes, in stage order, once release_other_stages() has
  /// freed them.
  std::vector<std::vector<std::int64_t>> released_shapes;
};

/// Cuts `model` into `stages` by the layer `counts` (empty: balanced by parameter count) and
/// returns stage `stage`'s part. ConfigError when the model is not a sequence of layers, or the
/// counts do not fit it.
StageOfModel cut_model(const nn::Model& model, const std::vector<std::int64_t>& counts, int stages,
                       int stage);

/// Frees the other stages' parameters and buffers (they become empty tensors), so that a rank
/// holds only its own stage's; their shapes stay in `part.released_shapes`.
void release_other_stages(StageOfModel& part);
/// The reverse: the other stages' tensors take their shapes again (uninitialised), to be
/// filled (from a checkpoint, or by gather_on_rank0).
void hold_other_stages(StageOfModel& part);

/// Collective over world rank 0's pipeline (nothing on the others): each stage sends its
/// tensors to stage 0, which then holds the whole model again (for the export).
void gather_on_rank0(StageOfModel& part, const Grid& grid);

/// Collective over the pipeline: `chunks` inputs forward through the stages' `layers`
/// without autograd, in bfloat16 with `bf16` (in_precision); stage 0 takes chunk i from
/// `input_of(i)`, the last stage hands its output to `take_output(i, output)`.
void forward_through(const std::vector<nn::Layer>& layers, const Grid& grid, std::int64_t chunks,
                     bool bf16, const std::function<torch::Tensor(std::int64_t)>& input_of,
                     const std::function<void(std::int64_t, const torch::Tensor&)>& take_output);

/// Collective over the pipeline: every stage gets the last stage's `values` (the loss and the
/// evaluation's sums, which only it knows).
void take_from_last_stage(std::span<double> values, const Grid& grid);

/// Collective over the pipeline: every stage's `totals` (its layers, compute and wait seconds,
/// bytes sent, peak micro-batches and activation bytes) and the parameters it trains, for the
/// done line.
nlohmann::json stage_report(const StageStats& totals, const Grid& grid, const StageOfModel& part,
                            std::int64_t parameters);

/// Collective over the pipeline: the "stage_steps" event of steps first_step, first_step + 1,
/// ..., each with every stage's compute and wait seconds; `mine` holds this stage's, a
/// (compute, wait) pair per step.
nlohmann::json stage_steps(const std::vector<double>& mine, const Grid& grid,
                           std::int64_t first_step);

}  // namespace distml::train::pipeline
