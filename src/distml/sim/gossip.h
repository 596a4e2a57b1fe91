// A step of decentralised SGD (strategy "gossip", train/strategies/gossip_strategy.h)
// replayed from a profile, with the run's own topology (gossip_offsets):
//  1. before forward, each rank copies its parameters and sends them to every out-neighbour
//     r + d while it receives from every in-neighbour r - d: one round of messages of the
//     parameters' bytes, all at once, through the cluster's links; each message's start-up in
//     the engine (Cluster::p2p_overhead_s) is paid one after another by the rank that posts
//     them; on links with a burst (network.h, Links) the steps are replayed until one leaves
//     the links' tokens as it found them, since the exchange may keep them busy most of a step;
//  2. forward and backward run meanwhile, then the optimizer steps locally;
//  3. the step then waits for the exchange, and mixes: it reads the k received copies, its own
//     parameters and their copy and writes the result, about k + 2 copies of the parameters,
//     each costed as the profile's copy of the model's parameters (its layers' copy_s; 0 for a
//     model that is not a sequence of layers).
#pragma once

#include <string>

#include "distml/sim/cluster.h"
#include "distml/sim/data_parallel.h"
#include "distml/sim/profile.h"

namespace distml::sim {

/// `topology` as strategy.topology names it: ring, exponential or complete.
StepPrediction predict_gossip_step(const Profile& profile, const std::string& topology,
                                   const Cluster& cluster);

}  // namespace distml::sim
