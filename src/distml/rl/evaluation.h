// Evaluation episodes: a fresh environment, a deterministic policy, undiscounted returns.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <string_view>
#include <vector>

#include "distml/rl/envs/env.h"

namespace distml::rl {

struct Evaluation {
  double mean_return = 0;
  std::int64_t episodes = 0;
  std::vector<double> returns;
};

/// Maps observations [1, obs] to one action (action size floats).
using Policy = std::function<std::vector<float>(const torch::Tensor& observation)>;

/// Runs `episodes` whole episodes of `env` one after another from seeds derived from `seed`;
/// an environment that fails is an EnvError naming it, the evaluation episode and the step.
Evaluation evaluate(std::string_view env, std::int64_t episodes, std::uint64_t seed,
                    const Policy& policy, const EnvOptions& options = {});

}  // namespace distml::rl
