// How a run splits its model (the parallel.* keys): the stages' layer counts, the
// tensor-parallel split of a stage, the pipeline stage that runs it, and the parameter
// budget. The trainer's set-up for a split model, in one place.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "distml/comm/communicator.h"
#include "distml/nn/model_registry.h"
#include "distml/train/config.h"
#include "distml/train/pipeline/grid.h"
#include "distml/train/pipeline/pipeline_stage.h"
#include "distml/train/task_data.h"
#include "distml/train/tensor_parallel/split_layers.h"

namespace distml::train {

/// Collective over `world` for parallel.partition = "profile" (the layers measured on every
/// rank and averaged): the layer count of each stage; empty to balance the parameters.
std::vector<std::int64_t> stage_counts(const TrainConfig& c, const pipeline::Grid& grid,
                                       comm::Communicator& world, const nn::Model& model,
                                       const TaskData& data);

/// With tensor ranks, this stage's layers split over them; ConfigError for a model without a
/// pair of Linear layers.
std::optional<tensor_parallel::SplitLayers> split_of(const TrainConfig& c,
                                                     const pipeline::Grid& grid,
                                                     const pipeline::StageOfModel& part,
                                                     const nn::Model& model);

/// This rank's stage: its layers (split, with tensor ranks) and the schedule that runs them;
/// `velocity` is what parallel.spectrain predicts from.
std::unique_ptr<pipeline::PipelineStage> stage_of(
    const TrainConfig& c, const pipeline::Grid& grid, const pipeline::StageOfModel& part,
    const std::optional<tensor_parallel::SplitLayers>& split, pipeline::VelocityFn velocity);

/// With pipeline stages, or ZeRO stage 3 (which runs the layers one by one), while the model
/// is whole: ConfigError (naming the key) unless its layers are its forward
/// (nn::Model::check_layers_are_forward), on two training rows.
void check_layers_make_the_model(const TrainConfig& c, const std::optional<pipeline::Grid>& grid,
                                 const nn::Model& model, const TaskData& data);

std::int64_t parameter_count(const nn::ModelTensors& tensors);

/// Collective over `world`: ConfigError when some rank would train more parameters than
/// parallel.max_stage_params.
void check_parameter_budget(const TrainConfig& c, const nn::ModelTensors& trained,
                            comm::Communicator& world);

}  // namespace distml::train
