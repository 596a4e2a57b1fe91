// A learner's whole state as one checkpoint payload (network, optimizer, the normaliser's shared
// statistics, counters), written through the checked, atomic checkpoint file of distml train.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <string>

#include "distml/rl/normalizer.h"

namespace distml::rl {

struct LearnerCounters {
  std::int64_t update = 0;
  std::int64_t env_steps = 0;
};

/// What a checkpoint holds besides the counters; `normalizer` may be null (Ape-X).
struct LearnerParts {
  torch::nn::Module& net;
  torch::optim::Optimizer& optimizer;
  Normalizer* normalizer = nullptr;
};

std::string save_learner_state(const LearnerParts& parts, const LearnerCounters& counters);
/// Restores what save_learner_state wrote; CheckpointError (naming `source`) if it does not fit.
LearnerCounters load_learner_state(const std::string& payload, const std::string& source,
                                   const LearnerParts& parts);

}  // namespace distml::rl
