// A step of local SGD (strategy "local_sgd", train/strategies/local_sgd_strategy.h) replayed
// from a profile: each rank steps on its own gradients, and after every `period`-th step the
// replicas' parameters are averaged by one blocking all-reduce of all of them (one flat copy,
// the communicator's automatic algorithm for its size). The step predicted is the mean over a
// period: the rank's compute, plus the average's time over the period.
#pragma once

#include <cstdint>
#include <string>

#include "distml/sim/cluster.h"
#include "distml/sim/data_parallel.h"
#include "distml/sim/profile.h"

namespace distml::sim {

struct LocalSgdOptions {
  std::string engine = "gloo";
  std::int64_t period = 8;
};

/// `buckets` holds the average, as one bucket timed within the step that makes it.
StepPrediction predict_local_sgd_step(const Profile& profile, const LocalSgdOptions& options,
                                      const Cluster& cluster);

}  // namespace distml::sim
