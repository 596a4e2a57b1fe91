// Steps of the parameter-server strategy (strategy.name = "ps",
// train/strategies/ps_strategy.h) played out event by event, each worker and server on its
// own, with the run's own layout of the shards (ps::Layout::plan, from the parameters' bytes):
//  1. a worker loads, runs forward and backward; each bucket is pushed to its server when its
//     last gradient is ready (the profile's ready times); after backward, a step header of
//     16 bytes goes to every server that holds a bucket;
//  2. a server's step of a worker is complete when the header and its buckets are in. By
//     mode: bsp applies once every worker's step is, then answers all of them; asp applies
//     each worker's step as it completes and answers it at once; ssp as asp, but holds the
//     answer to a worker while it is more than `staleness` steps ahead of the slowest. An
//     update takes the profile's optimizer time for the server's share of the bytes, one at a
//     time on the server's thread; the answer is the server's buckets' parameters, in order;
//     A straggler (PsOptions::slow_rank) sends its header late by its sleep;
//  3. the worker's step ends when every bucket's parameters are back, plus its bookkeeping
//     (Profile::other_s); its own optimizer never steps. The next step starts then.
// Messages go through Fabric (fabric.h), sharing the links fairly while they overlap. The step
// predicted is the workers' mean step once
// the first half of the steps has passed (the steady state, links' bursts included).
#pragma once

#include "distml/sim/cluster.h"
#include "distml/sim/data_parallel.h"
#include "distml/sim/profile.h"
#include "distml/train/strategies/ps_strategy.h"

namespace distml::sim {

struct PsOptions {
  train::PsStrategyOptions strategy;  // as the run builds it (train/strategy_factory.h)
  int steps = 40;                     // per worker; the second half is measured
  // train.slow_rank and train.slow_factor: that worker sleeps (factor - 1) x its forward and
  // backward after backward, as the trainer's straggler does.
  int slow_rank = -1;
  double slow_factor = 1;
};

/// The workers are the first world - servers ranks, as in the run. ConfigError when the
/// servers leave no worker. `buckets`: worker 0's exchanges of its last step, each with its
/// server's rank, from the push's start to the parameters' arrival.
StepPrediction predict_ps_step(const Profile& profile, const PsOptions& options,
                               const Cluster& cluster);

}  // namespace distml::sim
