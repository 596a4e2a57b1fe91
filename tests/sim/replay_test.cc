// A data-parallel step replayed from a profile against its timeline worked out by hand.
#include <gtest/gtest.h>

#include <tuple>

#include "distml/sim/data_parallel.h"
#include "distml/sim/local_sgd.h"

namespace distml::sim {
namespace {

using comm::Algorithm;

// Three parameters whose gradients are ready 2, 4 and 6 ms into a 6 ms backward, last first,
// each its own bucket (first cap 100 bytes, then 200: parameter 0's 400 bytes go alone).
Profile toy() {
  Profile p;
  p.data_s = 0.001;
  p.forward_s = 0.002;
  p.backward_s = 0.006;
  p.optimizer_s = 0.0005;
  p.threads = 1;
  p.cores = 2;
  p.parameters = {
      {"fc0.weight", 400, 0.006}, {"fc1.weight", 200, 0.004}, {"fc2.weight", 100, 0.002}};
  return p;
}

AllreduceOptions ring_options() {
  AllreduceOptions o;
  o.algorithm = Algorithm::ring;
  o.first_bucket_bytes = 100;
  o.bucket_bytes = 200;
  return o;
}

// 2 hosts: a ring all-reduce of S takes 2 alpha + S / beta = 2 ms + S / (100 bytes/ms).
Cluster two_hosts() {
  Cluster c;
  c.hosts = 2;
  c.network = {1e-3, 1e5};
  return c;
}

// Times within a few ulps of the hand-computed ones (sums of a dozen doubles).
#define EXPECT_TIME(got, want) EXPECT_NEAR(got, want, 1e-15)

TEST(Replay, BucketsStartWhenReadyAndTheLinkIsFree) {
  const auto p = predict_allreduce_step(toy(), ring_options(), two_hosts());
  // Backward starts at 3 ms. Bucket 0 (100 B) ready at 5 ms runs 3 ms to 8; bucket 1 (200 B)
  // ready at 7 waits for the link until 8 and runs 4 ms to 12; bucket 2 (400 B) ready at 9
  // runs 6 ms from 12 to 18. Backward ends at 9; the optimizer's 0.5 ms follows the last.
  ASSERT_EQ(p.buckets.size(), 3u);
  const double want[3][4] = {
      {100, 0.005, 0.005, 0.008}, {200, 0.007, 0.008, 0.012}, {400, 0.009, 0.012, 0.018}};
  for (int b = 0; b < 3; ++b) {
    SCOPED_TRACE(b);
    EXPECT_EQ(p.buckets[b].bytes, want[b][0]);
    EXPECT_TIME(p.buckets[b].ready_s, want[b][1]);
    EXPECT_TIME(p.buckets[b].start_s, want[b][2]);
    EXPECT_TIME(p.buckets[b].end_s, want[b][3]);
    EXPECT_EQ(p.buckets[b].algorithm, Algorithm::ring);
  }
  EXPECT_TIME(p.step_s, 0.0185);
  EXPECT_TIME(p.comm_s, 0.013);
  EXPECT_TIME(p.exposed_comm_s, 0.009);
  EXPECT_TIME(p.compute_s, 0.0095);
  EXPECT_EQ(p.bytes_per_link, 700);  // a ring of 2 sends each bucket once per host
}

TEST(Replay, WithoutOverlapEveryBucketWaitsForBackward) {
  auto options = ring_options();
  options.overlap = false;
  const auto p = predict_allreduce_step(toy(), options, two_hosts());
  EXPECT_TIME(p.buckets[0].start_s, 0.009);
  EXPECT_TIME(p.step_s, 0.009 + 0.003 + 0.004 + 0.006 + 0.0005);
}

TEST(Replay, CompressedBucketsFollowBackwardWithTheirArithmeticAndCollectives) {
  // Over gloo, whose automatic all-reduce of a few bytes is the binomial tree: on 2 hosts
  // 2 (alpha + S / beta). Bucket 0 (fc2) all-gathers 10 bytes (a ring of 2: one step, 1.1 ms)
  // after 1 ms of arithmetic and 0.5 ms decoding the other rank's; bucket 1 all-reduces 20
  // then 30 bytes (2.4 + 2.6 ms) after 2 ms; bucket 2 all-reduces 40 (2.8 ms); then the
  // flags, a float32 per bucket (12 bytes, 2.24 ms). From backward's end at 9 ms: 9 + 1.5 +
  // 1.1 = 11.6, + 2 + 5 = 18.6, + 2.8 = 21.4, + 2.24 = 23.64; the optimizer's 0.5 ms after.
  auto options = ring_options();
  options.engine = "gloo";
  options.flag_bytes = 4;
  options.compressed = {
      {{{true, 10}}, 0.001, 0.0005}, {{{false, 20}, {false, 30}}, 0.002, 0}, {{{false, 40}}, 0, 0}};
  const auto p = predict_allreduce_step(toy(), options, two_hosts());
  ASSERT_EQ(p.buckets.size(), 4u);
  const double want[4][3] = {
      {10, 0.009, 0.0116}, {50, 0.0116, 0.0186}, {40, 0.0186, 0.0214}, {12, 0.0214, 0.02364}};
  for (int b = 0; b < 4; ++b) {
    SCOPED_TRACE(b);
    EXPECT_EQ(p.buckets[b].bytes, want[b][0]);
    EXPECT_TIME(p.buckets[b].start_s, want[b][1]);
    EXPECT_TIME(p.buckets[b].end_s, want[b][2]);
  }
  EXPECT_TIME(p.step_s, 0.02414);
  EXPECT_EQ(p.bytes_per_link, 112);  // each host sends every collective's bytes once
}

TEST(Replay, ZeroShardsTheUpdateAndGathersTheParameters) {
  // 2 ranks: each bucket padded to 2 blocks of whole floats (100 bytes: 13 floats a block,
  // 104 bytes; 200: 100 a block; 400: 200). Stage 2 reduce-scatters (a ring of 2: one step of
  // a block, alpha + block / beta: 1.52, 2 and 3 ms) from the ready times 5, 7 and 9 ms: ends
  // 6.52, 9, 12. Stage 1 all-reduces by the ring (2 alpha + S / beta: 3.04, 4, 6 ms): ends
  // 8.04, 12.04, 18.04. Then the optimizer on half the parameters (0.25 ms) and the three
  // blocks all-gathered (1.52 + 2 + 3 ms).
  for (const auto [stage, synced, sent] :
       {std::tuple{2, 0.012, 352 + 352}, std::tuple{1, 0.01804, 704 + 352}}) {
    auto options = ring_options();
    options.zero_stage = stage;
    const auto p = predict_allreduce_step(toy(), options, two_hosts());
    SCOPED_TRACE(stage);
    ASSERT_EQ(p.buckets.size(), 3u);
    EXPECT_EQ(p.buckets[0].bytes, 104);
    EXPECT_TIME(p.buckets[2].end_s, synced);
    EXPECT_TIME(p.step_s, synced + 0.00025 + 0.00652);
    EXPECT_EQ(p.bytes_per_link, sent);
  }
}

TEST(Replay, OneRankOnlyComputes) {
  Cluster one;
  const auto p = predict_allreduce_step(toy(), ring_options(), one);
  EXPECT_TIME(p.step_s, 0.0095);
  EXPECT_EQ(p.bytes_per_link, 0);
}

TEST(Replay, RanksSharingCoresComputeSlower) {
  // The profile's rank had 1 thread on a core of its own; two ranks sharing one core have
  // half a core each.
  Cluster c = two_hosts();
  EXPECT_EQ(compute_slowdown(toy(), c), 1);
  c.shared_cores = 1;
  EXPECT_EQ(compute_slowdown(toy(), c), 2);
  c.shared_cores = 8;  // more cores than threads: no faster than the profile
  EXPECT_EQ(compute_slowdown(toy(), c), 1);
}

TEST(Replay, TheAutomaticAlgorithmIsTheRunsChoice) {
  // auto over gloo: the tree up to 512 KiB (comm/auto_policy.h), as the run takes it.
  AllreduceOptions o = ring_options();
  o.algorithm = Algorithm::automatic;
  const auto p = predict_allreduce_step(toy(), o, two_hosts());
  for (const auto& b : p.buckets) EXPECT_EQ(b.algorithm, Algorithm::tree);
}

TEST(Replay, LocalSgdAveragesThePeriodsOneAllreduce) {
  // Every 4th step one all-reduce of the 700 bytes of parameters after the 9.5 ms of compute:
  // auto over gloo at 2 ranks is the tree, 2 x (1 ms + 7 ms) = 16 ms, 4 ms a step.
  const auto p = predict_local_sgd_step(toy(), {"gloo", 4}, two_hosts());
  EXPECT_TIME(p.compute_s, 0.0095);
  EXPECT_TIME(p.step_s, 0.0095 + 0.004);
  EXPECT_TIME(p.exposed_comm_s, 0.004);
  ASSERT_EQ(p.buckets.size(), 1u);
  EXPECT_EQ(p.buckets[0].algorithm, Algorithm::tree);
  EXPECT_TIME(p.buckets[0].end_s - p.buckets[0].start_s, 0.016);
  EXPECT_EQ(p.bytes_per_link, 700.0 / 4);  // each host sends the vector once, every 4th step
}

TEST(Replay, OnLinksWithABurstTheStepIsTheSteadyOne) {
  // One 400- or 2000-byte gradient ready when a 4 ms backward ends; 1 ms of optimizer. 2 hosts,
  // 1 ms latency, 100 bytes/ms, a 500-byte burst; a ring of 2 sends half a host per step.
  Profile p;
  p.backward_s = 0.004;
  p.optimizer_s = 0.001;
  Cluster c = two_hosts();
  c.burst_bytes = 500;
  AllreduceOptions o = ring_options();
  o.first_bucket_bytes = o.bucket_bytes = 1e9;
  // 200 bytes a step from 500 tokens: 1 + 1 ms; the 5 ms before the next bucket refill them.
  p.parameters = {{"w", 400, 0.004}};
  EXPECT_TIME(predict_allreduce_step(p, o, c).step_s, 0.004 + 0.002 + 0.001);
  // 1000 bytes a step: (1000 - 500) / 100 + 1 = 6 ms, leaving 100 tokens; (1000 - 100) / 100 +
  // 1 = 10 ms; the 5 ms to the next bucket refill them to 500 again. A plain link: 2 x 11 ms.
  p.parameters = {{"w", 2000, 0.004}};
  EXPECT_TIME(predict_allreduce_step(p, o, c).step_s, 0.004 + 0.016 + 0.001);
  c.burst_bytes = 0;
  EXPECT_TIME(predict_allreduce_step(p, o, c).step_s, 0.004 + 0.022 + 0.001);
}

}  // namespace
}  // namespace distml::sim
