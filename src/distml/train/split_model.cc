#include "distml/train/split_model.h"

#include "distml/core/error.h"
#include "distml/train/objective.h"
#include "distml/train/pipeline/partition.h"
#include "distml/train/pipeline/profile.h"

namespace distml::train {
namespace {

// parallel.partition = "profile": the layers measured on every rank on one micro-batch of
// the training rows (pipeline/profile.h), averaged, then cut to balance forward + backward
// time.
std::vector<std::int64_t> profiled_counts(const TrainConfig& c, int stages,
                                          comm::Communicator& world, const nn::Model& model,
                                          const TaskData& data) {
  const auto micro = (c.train.batch_size + c.parallel.micro_batches - 1) / c.parallel.micro_batches;
  const auto rows =
      std::min<std::int64_t>(micro, static_cast<std::int64_t>(data.train.num_samples));
  if (rows == 0)
    throw ConfigError(cat(c.origin("parallel.partition"),
                          ": parallel.partition = \"profile\" needs training rows on every rank"));
  const Objective objective(c, data, model);
  const auto sample = rows_of(data.train, 0, rows);
  auto costs = pipeline::profile_layers(
      model.layers(), model.tensors(), objective.model_input(sample),
      [&](const torch::Tensor& out) { return objective.mean_loss_of(out, sample); }, 5,
      c.train.precision == "bf16");
  pipeline::average_over_ranks(costs, world);
  std::vector<double> seconds;
  for (const auto& l : costs) seconds.push_back(l.forward_s + l.backward_s);
  const auto counts = pipeline::balanced_partition(seconds, stages);
  return {counts.begin(), counts.end()};
}

}  // namespace

// The layer counts of the stages: the config's list; empty to balance parameters.
std::vector<std::int64_t> stage_counts(const TrainConfig& c, const pipeline::Grid& grid,
                                       comm::Communicator& world, const nn::Model& model,
                                       const TaskData& data) {
  if (grid.stages == 1) return {};
  if (c.parallel.partition_by_profile) return profiled_counts(c, grid.stages, world, model, data);
  return c.parallel.partition;
}

// With tensor ranks, this stage's layers split over them.
std::optional<tensor_parallel::SplitLayers> split_of(const TrainConfig& c,
                                                     const pipeline::Grid& grid,
                                                     const pipeline::StageOfModel& part,
                                                     const nn::Model& model) {
  if (grid.tensor_ranks == 1) return std::nullopt;
  if (tensor_parallel::splittable_pairs(model.layers()) == 0)
    throw ConfigError(cat(c.origin("parallel.tensor"), ": parallel.tensor = ", grid.tensor_ranks,
                          ": model \"", c.model.name,
                          "\" has no pair of consecutive Linear layers to split (tensor "
                          "parallelism splits the mlp's and LeNet-5's fully connected layers)"));
  return std::optional<tensor_parallel::SplitLayers>(std::in_place, part.layers, part.own,
                                                     *grid.tensor);
}

// This rank's stage: its layers (their Linear pairs split with tensor parallelism) and
// the schedule that runs them. Micro-batches are a pipeline's: one stage runs one pass.
std::unique_ptr<pipeline::PipelineStage> stage_of(
    const TrainConfig& c, const pipeline::Grid& grid, const pipeline::StageOfModel& part,
    const std::optional<tensor_parallel::SplitLayers>& split, pipeline::VelocityFn velocity) {
  return std::make_unique<pipeline::PipelineStage>(
      *grid.pipeline, split ? split->layers() : part.layers, split ? split->tensors() : part.own,
      pipeline::PipelineOptions{
          .schedule = c.parallel.schedule,
          .micro_batches = grid.stages > 1 ? static_cast<int>(c.parallel.micro_batches) : 1,
          .recompute = c.parallel.recompute,
          .spectrain = c.parallel.spectrain ? std::move(velocity) : pipeline::VelocityFn(),
          .log_weight_uses = false,
          .own_random_stream = grid.tensor_ranks == 1,
          .bf16 = c.train.precision == "bf16",
          .world_rank = [&grid](int s) { return grid.world_rank_of_stage(s); },
          .slowdown =
              grid.world_rank_of_stage(grid.stage) == c.train.slow_rank ? c.train.slow_factor : 1});
}

void check_layers_make_the_model(const TrainConfig& c, const std::optional<pipeline::Grid>& grid,
                                 const nn::Model& model, const TaskData& data) {
  const auto rows = std::min<std::int64_t>(2, static_cast<std::int64_t>(data.train.num_samples));
  const bool staged = grid && grid->stages > 1,
             zero3 = c.strategy.name == "zero" && c.strategy.stage == 3;
  if (!(staged || zero3) || rows == 0) return;
  const std::string key = staged ? "parallel.pipeline_stages" : "strategy.stage";
  try {
    model.check_layers_are_forward(
        Objective(c, data, model).model_input(rows_of(data.train, 0, rows)));
  } catch (const ConfigError& e) {
    throw ConfigError(cat(c.origin(key), ": ", key, " = ", staged ? grid->stages : c.strategy.stage,
                          " with model.path = ", c.model.path, ": ", e.what()));
  }
}

std::int64_t parameter_count(const nn::ModelTensors& tensors) {
  std::int64_t n = 0;
  for (const auto& p : tensors.parameters) n += p.numel();
  return n;
}

// Collective: parallel.max_stage_params against what the rank that trains the most trains
// (its stage, or its slices of it): the parameters, gradients and optimizer state it keeps
// after the start, when the other stages' tensors are freed (pipeline::release_other_stages).
void check_parameter_budget(const TrainConfig& c, const nn::ModelTensors& trained,
                            comm::Communicator& world) {
  const auto budget = c.parallel.max_stage_params;
  if (budget == 0) return;
  double most = static_cast<double>(parameter_count(trained));
  world.allreduce(comm::Buffer{&most, 1, comm::DType::f64}, {.op = comm::ReduceOp::max});
  if (most <= static_cast<double>(budget)) return;
  const bool split = c.parallel.pipeline_stages > 1 || c.parallel.tensor > 1;
  throw ConfigError(cat(c.origin("parallel.max_stage_params"),
                        ": parallel.max_stage_params = ", budget, ", but a rank would train ",
                        static_cast<std::int64_t>(most), " parameters: ",
                        split ? "cut the model into more stages (parallel.pipeline_stages) or "
                                "split it (parallel.tensor)"
                              : "the model does not fit one rank; cut it into stages with "
                                "parallel.pipeline_stages"));
}

}  // namespace distml::train
