// `distml train --profile FILE`: what the simulator needs of this run (sim/profile.h), measured
// by rank 0 and written when the run ends.
//  1. The step's phases from rank 0's timeline (its "main" lane): the medians over the steps
//     of the time each step spent loading, in forward, in backward and in the optimizer, and
//     of the step itself; the first step (warm-up) is left out when there are more.
//  2. When in backward each parameter's gradient is ready: the model's layers are measured
//     alone on one batch (train/pipeline/profile.h); backward runs them last to first, so a
//     layer's gradients are ready after its own and the later layers' backward times, scaled
//     so that they add up to the measured backward. A model that is not a sequence of layers
//     (char_lstm) has them ready in proportion to the bytes of the gradients after them.
//  A run's saved timeline converts into the same profile (`distml profile RUN_DIR`): its rank
//  0's "main" lane, recorded again into a Timeline (replay_main_lane), gives the same phases.
#pragma once

#include <deque>
#include <nlohmann/json.hpp>
#include <string>

#include "distml/core/timeline.h"
#include "distml/sim/profile.h"
#include "distml/train/config.h"
#include "distml/train/task_data.h"

namespace distml::cli {

sim::Profile measure_profile(Timeline& timeline, const train::TrainConfig& config,
                             const train::TaskData& data, int world, const std::string& engine);

/// The complete events of rank 0's "main" lane in `trace` (Chrome trace JSON, as --timeline
/// writes it) recorded into `timeline`'s "main" lane in the order they ended, a span nested in
/// another before it, as the run recorded them. `names` holds their names for as long as
/// `timeline` lives. DataError naming `source` when the trace has no such lane.
void replay_main_lane(const nlohmann::json& trace, const std::string& source, Timeline& timeline,
                      std::deque<std::string>& names);

}  // namespace distml::cli
