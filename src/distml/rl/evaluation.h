// Evaluation episodes: a fresh environment, a deterministic policy, undiscounted returns.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <string_view>
#include <vector>

namespace distml::rl {

struct Evaluation {
  double mean_return = 0;
  std::int64_t episodes = 0;
  std::vector<double> returns;
};

/// Maps observations [1, obs] to one action (action size floats).
using Policy = std::function<std::vector<float>(const torch::Tensor& observation)>;

/// Runs `episodes` whole episodes of `env` one after another from seeds derived from `seed`.
Evaluation evaluate(std::string_view env, std::int64_t episodes, std::uint64_t seed,
                    const Policy& policy);

}  // namespace distml::rl
