// What a simulation needs of one rank's training step, measured by `distml train --profile
// FILE` (cli/train_profile.h) on one machine: the step's phases, and each parameter's
// gradient size and the moment in backward when it is ready, from which the simulator buckets
// them as the strategy would for any configuration. Plain JSON; docs/simulator.md has the
// schema. Every time is a median over the run's steps, in seconds.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "distml/train/pipeline/cost_model.h"

namespace distml::sim {

struct ParameterProfile {
  std::string name;
  double bytes = 0;                   // its gradient
  double ready_s = 0;                 // after backward starts
  std::vector<std::int64_t> shape{};  // optional (PowerSGD's matrices); empty: not recorded
};

/// The model's layers measured on micro-batches of `rows` samples (train/pipeline/profile.h).
struct LayersAt {
  std::int64_t rows = 0;
  std::vector<train::pipeline::LayerCost> costs;  // one per layer, in order
};

struct Profile {
  static constexpr int kVersion = 1;
  std::string model, dtype, engine;
  std::int64_t batch_size = 0;  // per rank
  int world = 1;                // ranks of the measured run
  int threads = 1;              // each rank's (train.threads)
  int cores = 1;                // of the machine it was measured on
  double data_s = 0, forward_s = 0, backward_s = 0, optimizer_s = 0;
  double other_s = 0;      // the step's time outside every recorded phase (its bookkeeping)
  double step_s = 0;       // measured, comparable to the simulator's prediction at `world`
  double eval_s = 0;       // one evaluation; 0 when the run made none
  std::int64_t steps = 0;  // the steps measured
  std::vector<ParameterProfile> parameters;  // in the model's order
  // A model that is a sequence of layers: their names, and their costs at a few micro-batch
  // sizes (rows ascending), what pipelines are replayed from. Empty for other models.
  std::vector<std::string> layer_names;
  std::vector<LayersAt> layers;

  double gradient_bytes() const;
  /// The step's own work: loading, forward, backward, optimizer and bookkeeping.
  double compute_s() const { return data_s + forward_s + backward_s + optimizer_s + other_s; }
  /// The layers' costs on micro-batches of `rows`: the measured size nearest above (or the
  /// largest), its times scaled by rows over its rows; empty without layers.
  std::vector<train::pipeline::LayerCost> layers_at(std::int64_t rows) const;
};

nlohmann::json profile_json(const Profile& profile);
/// DataError naming `where` (the file) and the key that is missing or wrong.
Profile profile_from_json(const nlohmann::json& json, const std::string& where);

/// Written atomically.
void write_profile(const Profile& profile, const std::string& path);
Profile read_profile(const std::string& path);

}  // namespace distml::sim
