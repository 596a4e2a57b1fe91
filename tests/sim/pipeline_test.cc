// A pipeline's step replayed from a profile's layers against the bubble's closed form.
#include "distml/sim/pipeline.h"

#include <gtest/gtest.h>

#include <cmath>

namespace distml::sim {
namespace {

// `n` equal layers measured on 8 rows: 1 ms forward, 2 ms backward, 100 bytes of parameters
// (updates free), 1 ms of loading and 0.5 ms of bookkeeping per step.
Profile equal_layers(int n) {
  Profile p;
  p.batch_size = 8;
  p.data_s = 0.001;
  p.other_s = 0.0005;
  LayersAt at{8, {}};
  for (int i = 0; i < n; ++i) {
    at.costs.push_back({.forward_s = 0.001, .backward_s = 0.002, .parameter_bytes = 100});
    p.layer_names.push_back("layer" + std::to_string(i));
  }
  p.layers = {at};
  return p;
}

// Free links: ranks on hosts of their own, no latency, no limit to the bandwidth.
Cluster free_links(int ranks) {
  Cluster c;
  c.hosts = ranks;
  c.network = {0, 1e300};
  return c;
}

TEST(Pipeline, StepIsTheBubbleModel) {
  // S stages of one layer each over m micro-batches of 8 / m rows: each micro-batch costs a
  // stage c = 3 ms / m (the measured times scaled by the rows), and the pipeline takes
  // (m + S - 1) c, its bubble (S - 1) / (m + S - 1) of it.
  for (int stages : {2, 3}) {
    for (int m : {1, 2, 4, 8}) {
      for (const char* schedule : {"gpipe", "1f1b"}) {
        SCOPED_TRACE(testing::Message()
                     << stages << " stages, " << m << " micro-batches, " << schedule);
        const PipelineOptions o{.stages = stages, .micro_batches = m, .schedule = schedule};
        const auto p = predict_pipeline_step(equal_layers(stages), o, free_links(stages));
        const double c = 0.003 / m, pipeline = p.step_s - 0.0015;
        // Sums of 2 (m + S) op times of milliseconds: a few ulps of the step.
        EXPECT_NEAR(pipeline, (m + stages - 1) * c, 1e-15);
        EXPECT_NEAR(1 - m * c / pipeline, (stages - 1.0) / (m + stages - 1), 1e-12);
        EXPECT_EQ(p.batches, 1);
        // A start-up of 0.1 ms per message: under gpipe, whose forwards and backwards each
        // go as one wave, the 2 (S - 1) hops of the wave's front wait for a tensor's header
        // and data, 0.2 ms more each. (Under 1f1b a stage also waits for the next forward
        // between its backwards, so more hops count.)
        if (std::string(schedule) != "gpipe") continue;
        Cluster slow_start = free_links(stages);
        slow_start.p2p_overhead_s = 1e-4;
        const double later = predict_pipeline_step(equal_layers(stages), o, slow_start).step_s;
        EXPECT_NEAR(later - p.step_s, 2 * (stages - 1) * 2e-4, 1e-15);
      }
    }
  }
}

TEST(Pipeline, ReplicasAllReduceTheirStagesAfterThePipeline) {
  // 3 replicas of 2 stages on 6 hosts (alpha 1 ms, beta 1e5 bytes/s): after the pipeline,
  // each stage's 200 bytes go round a ring of 3: 2 (R - 1) (alpha + P / R / beta).
  Cluster c;
  c.hosts = 6;
  c.network = {1e-3, 1e5};
  const PipelineOptions o{.stages = 2, .micro_batches = 1, .schedule = "1f1b"};
  const auto p = predict_pipeline_step(equal_layers(4), o, c);
  const double ring = 2 * 2 * (1e-3 + 200.0 / 3 / 1e5);
  EXPECT_NEAR(p.comm_s, ring, 1e-15);
  EXPECT_EQ(p.batches, 3);
}

TEST(Pipeline, SlowRankSlowsItsStage) {
  // Two stages of one layer, one micro-batch, the second stage's rank 3 times slower: forward
  // 1 + 3 ms, backward 6 + 2 ms, and the 1.5 ms around the pipeline. Rank 3 of 2 replicas is
  // the second replica's second stage: its replica's pipeline is the slow one.
  for (int slow_rank : {1, 3}) {
    const PipelineOptions o{.stages = 2,
                            .micro_batches = 1,
                            .schedule = "1f1b",
                            .slow_rank = slow_rank,
                            .slow_factor = 3};
    Cluster c = free_links(4);
    c.network.latency_s = 0;
    const auto p = predict_pipeline_step(equal_layers(2), o, c);
    EXPECT_NEAR(p.step_s - p.comm_s, 0.012 + 0.0015, 1e-15) << "slow rank " << slow_rank;
  }
}

TEST(Pipeline, CutsTheLayersAsTheRunDoes) {
  // Balanced by parameters (the default), by time ("profile"), or the config's counts: a
  // first layer that holds the most parameters and takes no time moves the cut.
  Profile profile = equal_layers(4);
  auto& costs = profile.layers[0].costs;
  costs[0].parameter_bytes = 300;  // parameters 300, 100, 100, 100: cut after layer 1
  costs[0].forward_s = costs[0].backward_s = 0;
  const auto step = [&](PipelineOptions o) {
    return predict_pipeline_step(profile, o, free_links(2)).step_s - 0.0015;
  };
  // Two micro-batches of 4 rows under gpipe; layers 1 to 3 take 0.5 ms forward and 1 ms
  // backward on each.
  // By parameters, [1 | 3] (300 against 300): stage 0 costs nothing, stage 1 runs its three
  // layers on both micro-batches, 2 x 4.5 ms.
  PipelineOptions o{.stages = 2, .micro_batches = 2, .schedule = "gpipe"};
  EXPECT_NEAR(step(o), 0.009, 1e-15);
  // By time, [2 | 2] (3 ms against 6; [3 | 1] ties and the earlier cut wins): stage 0's
  // forwards end at 0.5 and 1 ms, stage 1's at 1.5 and 2.5, its backwards at 4.5 and 6.5,
  // stage 0's at 5.5 and 7.5 ms.
  o.partition_by_profile = true;
  EXPECT_NEAR(step(o), 0.0075, 1e-15);
  o.partition_by_profile = false;
  o.partition = {2, 2};
  EXPECT_NEAR(step(o), 0.0075, 1e-15);
  o.partition = {1, 3};
  EXPECT_NEAR(step(o), 0.009, 1e-15);
}

TEST(Pipeline, RefusesWhatItCannotReplay) {
  EXPECT_THROW(predict_pipeline_step(Profile{}, {}, free_links(2)), ConfigError);
  EXPECT_THROW(predict_pipeline_step(equal_layers(2), {.schedule = "pipedream"}, free_links(2)),
               ConfigError);
  EXPECT_THROW(predict_pipeline_step(equal_layers(2), {}, free_links(3)), ConfigError);
}

}  // namespace
}  // namespace distml::sim
