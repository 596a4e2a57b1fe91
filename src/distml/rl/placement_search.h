// Placing a sequence of layers onto pipeline stages by reinforcement learning, with a simulated
// step as the reward: Mirhoseini et al. 2017 ("Device placement optimization with
// reinforcement learning") learn a placement by REINFORCE with the measured step time as the
// reward; here the reward is the pipeline simulator's time (train/pipeline/simulate.h), so
// that ranks of unequal speed and links of unequal bandwidth, which the partition's dynamic
// programming (cost_model.h) does not model, are placed for.
//
// The search, step by step:
//  1. A placement gives each stage a contiguous run of at least one layer (what a pipeline
//     runs). The policy builds one layer by layer: before layer l (1 <= l < L), at stage s,
//     it cuts (the layer opens stage s + 1) with probability sigmoid(theta[l][s]), unless the
//     cut is forced (as many layers left as stages to open) or impossible (at the last
//     stage). Every contiguous placement has a non-zero probability, and a table of L x S
//     logits can put all of it on any one placement.
//  2. Each iteration samples `samples` placements and times each with `step_s` (cached: a
//     placement is simulated once). The reward is -log(step time), so that the learning is
//     the same whatever the model's scale, and the advantage is the reward less the batch's
//     mean (the baseline), divided by the batch's standard deviation.
//  3. REINFORCE (Williams 1992): the policy's parameters follow the gradient of
//     mean(advantage x log pi(placement)), with Adam.
//  4. The result is the fastest placement sampled over the search (as Mirhoseini et al.
//     report the best placement found), beside the policy's most likely one at the end.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

namespace distml::rl {

struct PlacementSearchOptions {
  int iterations = 200;        // policy updates
  int samples = 32;            // placements sampled per update
  double learning_rate = 0.1;  // Adam's
  std::uint64_t seed = 1;
};

struct PlacementSearchResult {
  std::vector<int> counts;  // the fastest placement sampled: layers per stage
  double step_s = 0;
  std::vector<int> most_likely;  // the trained policy's most likely placement
  double most_likely_step_s = 0;
  int placements_timed = 0;  // distinct placements `step_s` was asked for
};

/// The step time of a placement (layers per stage).
using PlacementTime = std::function<double(const std::vector<int>& counts)>;

/// Steps 1 to 4 for `layers` layers on `stages` stages. ConfigError when there are fewer
/// layers than stages or the options are out of range.
PlacementSearchResult search_placement(int layers, int stages, const PlacementTime& step_s,
                                       const PlacementSearchOptions& options = {});

}  // namespace distml::rl
