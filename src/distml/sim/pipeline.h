// A step of a pipeline (parallel.pipeline_stages > 1 with strategy "allreduce") replayed from
// a profile's layers, by the planner's own simulation (train/pipeline/simulate.h) and with the
// run's own decisions:
//  1. the layers are cut as the run cuts them (train/pipeline/grid.h, partition.h): the
//     config's counts, or balanced by parameters, or (parallel.partition = "profile") by the
//     layers' forward and backward time on one micro-batch;
//  2. the layers' costs are the profile's at the micro-batch's rows (Profile::layers_at);
//  3. the pipeline's ranks are neighbours (grid.h: rank = replica x stages + stage), so a
//     pipeline whose stages share a host talks through its memory, one that spans hosts
//     through the network, each tensor as two messages (its header, then its data: two of the
//     engine's start-ups, Cluster::p2p_overhead_s); the replicas' gradients are all-reduced across
//     hosts (the planner's ring, cost_model.h step 4), after the pipeline;
//  4. with shared cores, each pipeline's stages share their part of them;
//  5. stage 0 loads the batch before the pipeline and the step's bookkeeping follows it;
//  6. train.slow_rank's stage computes slow_factor times slower (in its replica, which the
//     others then wait for in the all-reduce), as the run's straggler does (pipeline_stage.h).
// gpipe and 1f1b are replayed; pipedream and ddg, whose updates interleave the replicas'
// all-reduces, are not yet.
#pragma once

#include <string>
#include <vector>

#include "distml/sim/cluster.h"
#include "distml/sim/data_parallel.h"
#include "distml/sim/profile.h"

namespace distml::sim {

struct PipelineOptions {
  int stages = 2;
  int micro_batches = 4;
  std::string schedule = "1f1b";
  bool recompute = false;
  std::vector<std::int64_t> partition{};  // the config's; empty: balanced by parameters
  bool partition_by_profile = false;
  int slow_rank = -1;  // 6. train.slow_rank, train.slow_factor
  double slow_factor = 1;
};

/// ConfigError when the profile has no layers or the schedule is not replayed.
void check_replayable(const Profile& profile, const PipelineOptions& options);

/// check_replayable's errors, and ConfigError when the world is not a multiple of the stages.
StepPrediction predict_pipeline_step(const Profile& profile, const PipelineOptions& options,
                                     const Cluster& cluster);

}  // namespace distml::sim
