// A learner's whole state as one checkpoint payload (network, optimizer, counters), written
// through the checked, atomic checkpoint file of distml train.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <string>

namespace distml::rl {

struct LearnerCounters {
  std::int64_t update = 0;
  std::int64_t env_steps = 0;
};

std::string save_learner_state(torch::nn::Module& net, torch::optim::Optimizer& optimizer,
                               const LearnerCounters& counters);
/// Restores what save_learner_state wrote; CheckpointError (naming `source`) if it does not fit.
LearnerCounters load_learner_state(const std::string& payload, const std::string& source,
                                   torch::nn::Module& net, torch::optim::Optimizer& optimizer);

}  // namespace distml::rl
