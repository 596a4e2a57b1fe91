// A pipeline step played out op by op: the step time of a partition under a schedule, on
// ranks that may share cores. `distml plan` predicts with it; the closed form of
// cost_model.h, which the partition search minimises, is its special case of equal stages
// on a core each.
//
// The simulation, step by step:
//  1. Each stage runs its ops in its schedule's order (schedule.h): the forward of
//     micro-batch i takes the sum of its layers' forward times, the backward the sum of their
//     backward times, plus their forward times again where the backward re-computes the
//     forward (parallel.recompute, pipedream, ddg); then the optimizer's update of its
//     parameters, once at the end, or after every backward (pipedream, ddg). Weight stashing
//     (pipedream, ddg) adds a copy of the stage's weights to each forward and three to each
//     backward (the stash taken; the current weights kept, the stash put in, the current
//     weights put back).
//  2. A forward waits for the previous stage's forward of the same micro-batch plus the
//     link's one-way time (latency + the activations' bytes / bandwidth); a backward waits for
//     the next stage's backward of it plus the same (the last stage's follows its own forward).
//  3. The stages that compute at the same moment share the pipeline's cores equally: each
//     runs at min(1, cores / (busy stages x threads)) of its measured speed (processor
//     sharing, as the kernel's scheduler roughly gives it), times the measured sharing
//     efficiency when they are more than the cores (switching between processes costs). The
//     clock advances from one event (an op ends, an op's input arrives) to the next.
//  4. The step ends with the last op, then the slowest stage's ring all-reduce across the
//     replicas (cost_model.h, step 4), after each update under pipedream.
//  5. Ranks and links may differ (Unequal): a stage whose rank is slower takes its slowdown
//     times the measured time for each op (its update included), and a link may have its own
//     latency and bandwidth. `distml plan --search rl` places layers on such ranks.
//  6. ddg's steps overlap (stage s back-propagates batch t - (S - 1 - s) in step t): its
//     micro-batches are whole batches, in 1f1b's order, and its step is the time per batch of
//     a long run, (T(2K) - T(K)) / K with K = 4 S, so that the fill and the drain cancel.
#pragma once

#include <string>
#include <vector>

#include "distml/train/pipeline/cost_model.h"

namespace distml::train::pipeline {

struct Cores {
  double available = 1e300;       // cores the pipeline's ranks share (its share of its host's)
  int threads = 1;                // per rank, as the layers were measured with
  double sharing_efficiency = 1;  // speed kept when more threads than cores compute (step 3)
};

/// Where the pipeline's ranks and links differ from the measured ones (step 5).
struct Unequal {
  std::vector<double> slowdown;  // per stage, >= 1 (empty: every stage at the measured speed)
  std::vector<Link> links;       // per link, links[s] after stage s (empty: every one `link`)
};

/// Seconds of one step of `layers` cut by `counts` under `schedule` (ddg: `layers` measured
/// on the whole batch; `micro_batches` is not used), `recompute` being gpipe's option.
/// ConfigError when `unequal` names other than one slowdown per stage or one link per cut.
double simulated_step_s(const std::vector<LayerCost>& layers, const std::vector<int>& counts,
                        int micro_batches, const std::string& schedule, const Link& link,
                        const Cores& cores = {}, int replicas = 1, bool recompute = false,
                        const Unequal& unequal = {});

}  // namespace distml::train::pipeline
