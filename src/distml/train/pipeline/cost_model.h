// The pipeline's cost model and planner: the step time a partition is predicted to take, from
// each layer's measured compute time and output size and the link's latency and bandwidth,
// and the partition (and grid, and number of micro-batches) that minimises it.
//
// The model, for S stages over m micro-batches of a synchronous schedule (gpipe or 1f1b take
// the same time; they differ in memory):
//  1. Stage s computes c_s = sum over its layers of (forward + backward) per micro-batch, the
//     loss included on the last stage.
//  2. The link after stage s carries each micro-batch's activations forward and their
//     gradient back: k_s = 2 (latency + bytes_s / bandwidth), bytes_s being the output of the
//     stage's last layer for one micro-batch.
//  3. The first micro-batch crosses every stage and link forward and back: sum c_s + sum k_s.
//     Each of the other m - 1 then adds the time of the slowest stage or link (the bottleneck
//     every micro-batch queues behind):
//         pipeline = sum c_s + sum k_s + (m - 1) max(max c_s, max k_s).
//     With equal stages and free links this is the bubble model (m + S - 1) c.
//  4. With R replicas, the slowest stage's gradient all-reduce (a ring: 2 (R - 1) steps of
//     latency + its parameter bytes / R / bandwidth) follows: step = pipeline + max_s a_s.
// The planner's partition is exact for the pipeline's time (1 to 3): for each candidate
// bottleneck B (a stage's or link's cost), dynamic programming over cut points (PipeDream's
// planner) finds the cuts whose stages and links all cost at most B with the least sum of
// link costs; the best of these over every B is the optimum, since that time is sum c (the
// same for every cut) + sum k + (m - 1) B. Step 4 is added to each candidate's time, not
// searched jointly.
#pragma once

#include <string>
#include <vector>

namespace distml::train::pipeline {

/// One layer, measured at one micro-batch size.
struct LayerCost {
  double forward_s = 0, backward_s = 0;  // (the last layer's include the loss)
  double output_bytes = 0;               // its output for one micro-batch
  double parameter_bytes = 0;
  double update_s = 0;  // a momentum SGD update of its parameters (simulate.h; once per step)
  double copy_s = 0;    // one copy of its parameters (simulate.h: weight stashing)
};

struct Link {
  double latency_s = 0;
  double bytes_per_s = 1e300;
};

/// Predicted seconds of one step (steps 1 to 4 above) of `layers` cut by `counts`.
double predicted_step_s(const std::vector<LayerCost>& layers, const std::vector<int>& counts,
                        int micro_batches, const Link& link, int replicas = 1);

/// Step 4 alone: the slowest stage's ring all-reduce over `replicas` (0 for one).
double slowest_allreduce_s(const std::vector<LayerCost>& layers, const std::vector<int>& counts,
                           const Link& link, int replicas);

struct Partition {
  std::vector<int> counts;  // layers per stage
  double step_s = 0;        // predicted
};

/// The partition into `stages` with the least predicted step time. ConfigError when there are
/// fewer layers than stages.
Partition best_partition(const std::vector<LayerCost>& layers, int stages, int micro_batches,
                         const Link& link, int replicas = 1);

}  // namespace distml::train::pipeline
