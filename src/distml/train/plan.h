// `distml plan`: the grid, micro-batches and partition that the cost model
// (pipeline/cost_model.h) predicts to train fastest on this world, from the model's layers
// measured on this machine (pipeline/profile.h) and the link between two ranks.
//
// The plan, step by step (collective over the world):
//  1. Rank 0 builds the configured model and measures its layers alone (the others wait) on
//     one micro-batch of the training rows, once per micro-batch size a candidate needs.
//     When the ranks' threads outnumber their host's cores, every rank also measures the
//     whole batch at once: the ideal slowdown over the measured one is the sharing
//     efficiency that the simulation applies (simulate.h, step 3).
//  2. The link's latency and bandwidth: given, or measured by ping-pong between ranks 0 and 1
//     (8 bytes and 4 MiB, medians), and shared by rank 0. When the ranks outnumber the cores,
//     the others compute meanwhile and the latency is the mean of the small messages', which
//     then includes the scheduler's delay in running a rank whose input has arrived.
//  3. Each candidate grid (S stages x R = world / S replicas; one stage runs one pass) with
//     each candidate number of micro-batches gets its best partition (cost_model.h) and its
//     step time simulated under parallel.schedule (simulate.h), with each rank's share of its
//     host's cores; the chosen one trains the most samples per second (R x train.batch_size /
//     step). Under ddg, whose steps run whole batches and overlap, a grid has one candidate:
//     the partition balanced as for a long pipeline, and the time per step of a long run.
//  4. With train.slow_rank, that rank's stage runs slow_factor times slower in the simulation
//     (the dynamic programming of step 3 still assumes equal ranks: its plan is the
//     equal-rank one). With search = "rl", each grid also gets the placement that REINFORCE
//     learns with the simulation as its reward (rl/placement_search.h), a candidate of its
//     own: rank 0 learns it and every rank takes rank 0's.
// Tensor parallelism is not planned (parallel.tensor stays 1).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "distml/comm/communicator.h"
#include "distml/train/config.h"
#include "distml/train/pipeline/cost_model.h"
#include "distml/train/task_data.h"

namespace distml::train {

struct PlanOptions {
  std::vector<int> stages;             // candidates; empty: every divisor of the world size
  std::vector<int> micro_batches;      // candidates; empty: parallel.micro_batches
  std::optional<pipeline::Link> link;  // empty: measured between ranks 0 and 1
  int reps = 5;                        // timed passes per measurement
  std::string search = "dp";           // "dp", or "rl" for step 4's learnt placements too
};

struct GridPlan {
  int stages = 1, replicas = 1, micro_batches = 1;
  std::vector<int> counts{};  // layers per stage
  double step_s = 0;          // predicted (simulated)
  double samples_per_s = 0;
  std::string search = "dp";  // what found the partition: "dp" or "rl" (step 4)
};

struct Plan {
  pipeline::Link link;
  bool link_measured = false;
  double cores_per_rank = 1;      // step 3: the host's cores / its ranks (the least over the hosts)
  double sharing_efficiency = 1;  // step 3: measured when the ranks' threads outnumber the cores
  int slow_rank = -1;             // step 4: train.slow_rank, slowed by train.slow_factor
  double slow_factor = 1;
  std::vector<std::string> layer_names;
  std::vector<pipeline::LayerCost> layers;  // measured, at the chosen micro-batch size
  std::vector<GridPlan> candidates;         // in the order tried
  GridPlan best;
};

/// Collective over `world`. ConfigError when no candidate fits (more stages than layers).
Plan make_plan(const TrainConfig& config, const TaskData& data, comm::Communicator& world,
               const PlanOptions& options);

/// The config overrides that run `plan` ("parallel.pipeline_stages=2", ...), for
/// load_config() and for the user's command line.
std::vector<std::string> plan_overrides(const GridPlan& plan);

}  // namespace distml::train
