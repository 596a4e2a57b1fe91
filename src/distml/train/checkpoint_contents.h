// What a training checkpoint holds, and the rules for resuming from one: the model's
// parameters and buffers by name (built-in and TorchScript models alike), the optimizer
// state, the step, the sampler's position, the random generator, the world size and the
// configuration it was written under. checkpoint_file.h makes the file around it.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <string>

#include "distml/data/sharded_sampler.h"
#include "distml/nn/model_registry.h"
#include "distml/train/config.h"

namespace distml::train {

struct TrainingPosition {
  std::int64_t global_step = 0;
  data::SamplerPosition sampler;
};

/// The checkpoint payload of a run at `position`, of `world_size` ranks under `config`.
std::string encode_checkpoint(const nn::Model& model, torch::optim::Optimizer& optimizer,
                              const TrainingPosition& position, int world_size,
                              const TrainConfig& config);

/// Loads a payload into the model, optimizer and the default random generator, and returns
/// where to go on from. CheckpointError naming `path` when it was written by a run whose
/// configuration differs in a key that shapes the trajectory (run keys such as train.epochs
/// may change), by another number of ranks, for another model, or is unreadable.
TrainingPosition decode_checkpoint(const std::string& payload, const std::string& path,
                                   nn::Model& model, torch::optim::Optimizer& optimizer,
                                   int world_size, const TrainConfig& config);

}  // namespace distml::train
