#include "distml/train/pipeline/grid.h"

#include "distml/core/error.h"
#include "distml/core/peak_rss.h"
#include "distml/train/autocast_scope.h"
#include "distml/train/pipeline/partition.h"
#include "distml/train/tensor_buffer.h"

namespace distml::train::pipeline {

Grid make_grid(comm::Communicator& world, int stages, int tensor_ranks) {
  const int per_replica = stages * tensor_ranks;
  DML_CHECK(stages >= 1 && tensor_ranks >= 1 && world.size() % per_replica == 0, stages,
            " stages x ", tensor_ranks, " tensor ranks do not divide ", world.size(), " ranks");
  Grid g;
  g.stages = stages;
  g.tensor_ranks = tensor_ranks;
  g.replicas = world.size() / per_replica;
  g.replica = world.rank() / per_replica;
  g.stage = world.rank() / tensor_ranks % stages;
  g.tensor_rank = world.rank() % tensor_ranks;
  g.pipeline = world.split(g.replica * tensor_ranks + g.tensor_rank, g.stage);
  g.peers = world.split(g.stage * tensor_ranks + g.tensor_rank, g.replica);
  g.tensor = world.split(g.replica * stages + g.stage, g.tensor_rank);
  return g;
}

StageOfModel cut_model(const nn::Model& model, const std::vector<std::int64_t>& counts, int stages,
                       int stage) {
  const auto layers = model.layers();
  const auto all = model.tensors();
  std::vector<double> sizes;  // parameters per layer
  for (const auto& layer : layers) {
    double n = 0;
    for (const auto& p : nn::select_modules(all, layer.modules).parameters)
      n += static_cast<double>(p.numel());
    sizes.push_back(n);
  }
  StageOfModel part;
  part.layer_counts = counts.empty()
                          ? balanced_partition(sizes, stages)
                          : checked_partition(counts, stages, static_cast<int>(layers.size()));
  const auto bounds = stage_bounds(part.layer_counts);
  for (int s = 0; s < stages; ++s) {
    std::vector<std::string> modules;
    for (int l = bounds[s]; l < bounds[s + 1]; ++l)
      modules.insert(modules.end(), layers[l].modules.begin(), layers[l].modules.end());
    part.stages.push_back(nn::select_modules(all, modules));
  }
  part.stage = stage;
  part.layers.assign(layers.begin() + bounds[stage], layers.begin() + bounds[stage + 1]);
  part.own = part.stages[stage];
  return part;
}

namespace {

// Runs a collective over the pipeline; a failure names this stage and what it waited for.
template <class Collective>
void along_pipeline(const Grid& grid, const std::string& waiting, Collective&& collective) {
  try {
    collective(*grid.pipeline);
  } catch (const CommError& e) {
    rethrow_naming(e, grid.stage, grid.world_rank_of_stage(grid.stage),
                   cat("waiting for the other stages ", waiting));
  }
}

}  // namespace

// The other stages' tensors, in stage order: parameters, then buffers.
template <class Visit>
void for_other_stages(const StageOfModel& part, Visit&& visit) {
  for (int s = 0; s < static_cast<int>(part.stages.size()); ++s) {
    if (s == part.stage) continue;
    for (const auto* tensors : {&part.stages[s].parameters, &part.stages[s].buffers})
      for (const auto& t : *tensors) visit(t);
  }
}

void release_other_stages(StageOfModel& part) {
  torch::NoGradGuard no_grad;
  const bool first_time = part.released_shapes.empty();
  for_other_stages(part, [&](torch::Tensor t) {
    if (first_time) part.released_shapes.push_back(t.sizes().vec());
    t.set_data(torch::empty({0}, t.options()));
  });
}

void hold_other_stages(StageOfModel& part) {
  torch::NoGradGuard no_grad;
  std::size_t i = 0;
  for_other_stages(part, [&](torch::Tensor t) {
    t.set_data(torch::empty(part.released_shapes.at(i++), t.options()));
  });
}

void gather_on_rank0(StageOfModel& part, const Grid& grid) {
  if (grid.replica != 0 || grid.tensor_rank != 0 || grid.stages == 1) return;
  torch::NoGradGuard no_grad;
  along_pipeline(grid, "to gather the model on rank 0", [&](comm::Communicator& pipeline) {
    if (grid.stage != 0) {
      for (const auto* tensors : {&part.own.parameters, &part.own.buffers})
        for (const auto& t : *tensors) pipeline.send(buffer_of(t.contiguous()), 0, 0);
      return;
    }
    hold_other_stages(part);
    for (int s = 1; s < grid.stages; ++s)
      for (const auto* tensors : {&part.stages[s].parameters, &part.stages[s].buffers})
        for (const auto& t : *tensors) pipeline.recv(buffer_of(t), s, 0);
  });
}

void forward_through(const std::vector<nn::Layer>& layers, const Grid& grid, std::int64_t chunks,
                     bool bf16, const std::function<torch::Tensor(std::int64_t)>& input_of,
                     const std::function<void(std::int64_t, const torch::Tensor&)>& take_output) {
  torch::NoGradGuard no_grad;
  const bool first = grid.stage == 0, last = grid.stage == grid.stages - 1;
  along_pipeline(grid, "to evaluate", [&](comm::Communicator& pipeline) {
    StageLink link(pipeline);
    for (std::int64_t i = 0; i < chunks; ++i) {
      const auto in = first ? input_of(i) : link.recv(grid.stage - 1, 0);
      const auto out = in_precision(bf16, [&] { return nn::run_layers(layers, in); });
      if (last) {
        take_output(i, out);
      } else {
        link.send(out, grid.stage + 1, 0);
        link.flush();  // one chunk on the way at a time: they share the tag
      }
    }
  });
}

void take_from_last_stage(std::span<double> values, const Grid& grid) {
  along_pipeline(grid, "to hear the last stage's results", [&](comm::Communicator& pipeline) {
    pipeline.broadcast(comm::Buffer{values.data(), values.size(), comm::DType::f64},
                       grid.stages - 1);
  });
}

nlohmann::json stage_report(const StageStats& totals, const Grid& grid, const StageOfModel& part,
                            std::int64_t parameters) {
  const std::vector<double> mine = {totals.compute_seconds,
                                    totals.wait_seconds,
                                    static_cast<double>(totals.bytes_sent),
                                    static_cast<double>(totals.peak_micro_batches),
                                    static_cast<double>(totals.peak_activation_bytes),
                                    static_cast<double>(parameters),
                                    peak_rss_mb()};
  std::vector<double> all(mine.size() * grid.stages);
  along_pipeline(grid, "to report their totals", [&](comm::Communicator& pipeline) {
    pipeline.allgather(comm::ConstBuffer{mine.data(), mine.size(), comm::DType::f64},
                       comm::Buffer{all.data(), all.size(), comm::DType::f64});
  });
  nlohmann::json stages = nlohmann::json::array();
  for (int s = 0; s < grid.stages; ++s) {
    const double* v = &all[s * mine.size()];
    stages.push_back({{"stage", s},
                      {"layers", part.layer_counts[s]},
                      {"compute_s", v[0]},
                      {"wait_s", v[1]},
                      {"bytes_sent", v[2]},
                      {"peak_micro_batches", v[3]},
                      {"peak_activation_bytes", v[4]},
                      {"parameters", v[5]},
                      {"peak_rss_mb", v[6]}});
  }
  return {{"stages", grid.stages},
          {"replicas", grid.replicas},
          {"tensor", grid.tensor_ranks},
          {"per_stage", stages}};
}

nlohmann::json stage_steps(const std::vector<double>& mine, const Grid& grid,
                           std::int64_t first_step) {
  std::vector<double> all(mine.size() * grid.stages);
  along_pipeline(grid, "to report their step times", [&](comm::Communicator& pipeline) {
    pipeline.allgather(comm::ConstBuffer{mine.data(), mine.size(), comm::DType::f64},
                       comm::Buffer{all.data(), all.size(), comm::DType::f64});
  });
  nlohmann::json steps = nlohmann::json::array();
  for (std::size_t k = 0; 2 * k < mine.size(); ++k) {
    std::vector<double> compute, wait;
    for (int s = 0; s < grid.stages; ++s) {
      compute.push_back(all[s * mine.size() + 2 * k]);
      wait.push_back(all[s * mine.size() + 2 * k + 1]);
    }
    steps.push_back({{"step", first_step + static_cast<std::int64_t>(k)},
                     {"compute_s", compute},
                     {"wait_s", wait}});
  }
  return {{"event", "stage_steps"}, {"steps", steps}};
}

}  // namespace distml::train::pipeline
