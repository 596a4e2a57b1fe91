// What a training checkpoint holds, and the rules for resuming from one: the model's
// parameters and buffers by name (built-in and TorchScript models alike), the optimizer
// state, the step, the sampler's position, the world size, the configuration it was written
// under, and for every rank its random generator (dropout resumes exactly) and its strategy's
// own state (ZeRO's optimizer shard). checkpoint_file.h makes the file around it.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <vector>

#include "distml/data/sharded_sampler.h"
#include "distml/nn/model_registry.h"
#include "distml/train/config.h"

namespace distml::train {

struct TrainingPosition {
  std::int64_t global_step = 0;
  data::SamplerPosition sampler;
};

/// What each rank keeps of its own, serialised.
struct RankState {
  std::string rng;        // the default CPU generator's state
  std::string strategy;   // Strategy::save_state()
  std::string optimizer;  // with a split model, its optimizer's state (each rank trains its
                          // own part); empty when the ranks share the one written once
};

/// The checkpoint payload of a run at `position` under `config`, of ranks.size() ranks.
std::string encode_checkpoint(const nn::Model& model, torch::optim::Optimizer& optimizer,
                              const TrainingPosition& position, const std::vector<RankState>& ranks,
                              const TrainConfig& config);

struct Resumed {
  TrainingPosition position;
  RankState own;             // what rank `rank` saved
  int saved_world_size = 0;  // the number of ranks that wrote it
  // Every saved rank's Strategy::save_state(), when they were more than this run's ranks.
  std::vector<std::string> strategies;
};

/// Which checkpoints a resume takes by their number of ranks.
enum class WorldChange {
  refuse,   // only one written by as many ranks as this run has
  elastic,  // also one of more or fewer ranks (an elastic restart): rank r takes rank r's
            // random state where that rank saved one (a rank new to the run keeps its own),
            // the strategy every rank's (Resumed::strategies), and the caller re-shards the
            // sampler's position
};

/// Loads a payload into the model and optimizer, and returns where to go on from and what
/// rank `rank` saved of its own. CheckpointError naming `path` when it was written by a run
/// whose configuration differs in a key that shapes the trajectory (run keys such as
/// train.epochs may change), by another number of ranks (unless elastic), for
/// another model, or is unreadable.
Resumed decode_checkpoint(const std::string& payload, const std::string& path, nn::Model& model,
                          torch::optim::Optimizer& optimizer, int rank, int world_size,
                          const TrainConfig& config, WorldChange change = WorldChange::refuse);

/// An optimizer's state, serialised, and loading it back.
std::string optimizer_state(torch::optim::Optimizer& optimizer);
void load_optimizer_state(torch::optim::Optimizer& optimizer, const std::string& state);

}  // namespace distml::train
