// The parameter server's steps played out against their closed forms.
#include "distml/sim/parameter_server.h"

#include <gtest/gtest.h>

namespace distml::sim {
namespace {

using train::ps::Mode;

// One parameter of S = 1000 bytes, ready as backward ends: 1 ms loading, 2 ms forward, 6 ms
// backward, 0.5 ms of optimizer for all the parameters.
Profile one_bucket(double bytes = 1000) {
  Profile p;
  p.data_s = 0.001;
  p.forward_s = 0.002;
  p.backward_s = 0.006;
  p.optimizer_s = 0.0005;
  p.parameters = {{"w", bytes, 0.006}};
  return p;
}

// Hosts of one rank each on links of alpha = 1 ms and beta = 1e5 bytes/s (S / beta = 10 ms).
Cluster ps_hosts(int n) {
  Cluster c;
  c.hosts = n;
  c.network = {1e-3, 1e5};
  return c;
}

PsOptions options(Mode mode, int servers = 1) {
  PsOptions o;
  o.strategy.servers = servers;
  o.strategy.server.mode = mode;
  o.steps = 6;
  return o;
}

// Sums of a few dozen doubles of milliseconds.
#define EXPECT_AT(got, want) EXPECT_NEAR(got, want, 1e-12)

TEST(ParameterServer, OneWorkerPushesAndPullsItsBucketThroughOneServer) {
  // Backward ends at 9 ms. The push takes S / beta = 10 ms on the link (9 to 19), the
  // 16-byte header follows it (0.16 ms), both arrive alpha later (20.16); the update
  // (0.5 ms) ends at 20.66; the pull takes 10 ms and arrives at 31.66. Links idle between
  // steps, so every step takes as long.
  const auto p = predict_ps_step(one_bucket(), options(Mode::bsp), ps_hosts(2));
  EXPECT_AT(p.step_s, 0.03166);
  ASSERT_EQ(p.buckets.size(), 1u);
  EXPECT_EQ(p.buckets[0].server, 1);
  EXPECT_AT(p.buckets[0].start_s, 0.009);
  EXPECT_AT(p.buckets[0].end_s, 0.03166);
  EXPECT_AT(p.exposed_comm_s, 0.03166 - 0.009);
  EXPECT_EQ(p.batches, 1);
  EXPECT_EQ(p.busiest_host, 0);
  EXPECT_EQ(p.bytes_per_link, 1016);  // the push and the header (the server answers 1000)
  // The engine's start-up of 0.1 ms delays the header's arrival and the answer's.
  Cluster slow_start = ps_hosts(2);
  slow_start.p2p_overhead_s = 1e-4;
  EXPECT_AT(predict_ps_step(one_bucket(), options(Mode::bsp), slow_start).step_s, 0.03186);
}

TEST(ParameterServer, BspWorkersShareTheServersLinkEachWay) {
  // W workers push S at once, each at beta / W through the server's link, then their headers
  // (each behind its push, as over one connection): all in W (S + 16) / beta after backward
  // ends, and alpha later. The update; then the W answers leave together, sharing the link
  // again: W S / beta, and alpha. Every worker starts its next step at the same moment:
  //   9 ms + W (S + 16) / beta + alpha + 0.5 ms + W S / beta + alpha,
  // the closed form of a parameter server's step: W S / beta each way through its link.
  const double beta = 1e5, alpha = 1e-3, s = 1000;
  for (int workers : {1, 2, 3, 5}) {
    SCOPED_TRACE(workers);
    const auto p = predict_ps_step(one_bucket(), options(Mode::bsp), ps_hosts(workers + 1));
    EXPECT_AT(p.step_s,
              0.009 + workers * (s + 16) / beta + alpha + 0.0005 + workers * s / beta + alpha);
    EXPECT_EQ(p.batches, workers);
    EXPECT_EQ(p.bytes_per_link, std::max(workers * s, s + 16));  // the server's, or a worker's
  }
}

TEST(ParameterServer, ShardsSpreadTheWorkersBytesOverTheServers) {
  // Two parameters of S / 2, each its own bucket (caps of 500 bytes), ready as backward ends,
  // on two servers (one bucket each, balanced by bytes). From 9 ms the worker's link carries
  // both pushes side by side (to 19 ms), then the two headers (to 19.32, there at 20.32); each
  // server updates its half (0.25 ms, to 20.57) and answers, the two answers sharing the
  // worker's link for 10 ms: there at 31.57. S / beta each way, whatever the shards.
  Profile profile = one_bucket();
  profile.parameters = {{"a", 500, 0.006}, {"b", 500, 0.006}};
  PsOptions o = options(Mode::bsp, 2);
  o.strategy.first_bucket_bytes = o.strategy.bucket_bytes = 500;
  const auto p = predict_ps_step(profile, o, ps_hosts(3));
  EXPECT_AT(p.step_s, 0.03157);
  ASSERT_EQ(p.buckets.size(), 2u);
  EXPECT_EQ(p.buckets[0].server, 1);
  EXPECT_EQ(p.buckets[1].server, 2);
  for (const auto& b : p.buckets) {
    EXPECT_AT(b.start_s, 0.009);
    EXPECT_AT(b.end_s, 0.03157);
  }
  EXPECT_EQ(p.busiest_host, 0);
  EXPECT_EQ(p.bytes_per_link, 1032);
}

TEST(ParameterServer, AsynchronousWorkersNeverWaitForTheOthersUpdates) {
  // With the server's link the bottleneck (100 ms of it per push against 9 ms of compute),
  // asp's step is at least W S / beta (the pushes come in while answers go out, the link's
  // two directions), and at most bsp's.
  Profile profile = one_bucket(10000);
  for (int workers : {2, 3}) {
    SCOPED_TRACE(workers);
    const auto bsp = predict_ps_step(profile, options(Mode::bsp), ps_hosts(workers + 1));
    const auto asp = predict_ps_step(profile, options(Mode::asp), ps_hosts(workers + 1));
    EXPECT_GE(asp.step_s, workers * 10000 / 1e5);
    EXPECT_LE(asp.step_s, bsp.step_s * (1 + 1e-12));
  }
}

TEST(ParameterServer, StalenessBoundsHowFarWorkersRunAheadOfAStraggler) {
  // Worker 0 computes 4 times as long (8 ms of forward and backward, 24 more after backward),
  // on links fast enough not to matter (1 GB/s, no latency). asp lets the other two run at
  // their own pace; ssp lets them lead by 2 steps at most, so over the measured steps they go
  // at the straggler's pace, and so does bsp.
  Cluster fast = ps_hosts(4);
  fast.network = {0, 1e9};
  auto run = [&](Mode mode) {
    PsOptions o = options(mode);
    o.steps = 40;
    o.strategy.server.staleness = 2;
    o.slow_rank = 0;
    o.slow_factor = 4;
    return predict_ps_step(one_bucket(), o, fast).step_s;
  };
  const double straggler = 0.009 + 0.024 + 0.0005, fast_worker = 0.009 + 0.0005;
  // The mean of the three workers' steps, each within the server's 0.5 ms updates of the
  // others' (its thread applies one step at a time) and the links' microseconds.
  EXPECT_NEAR(run(Mode::asp), (straggler + 2 * fast_worker) / 3, 0.0005);
  EXPECT_NEAR(run(Mode::ssp), straggler, 0.0005);
  EXPECT_NEAR(run(Mode::bsp), straggler, 0.0005);
}

TEST(ParameterServer, NeedsAWorker) {
  EXPECT_THROW(predict_ps_step(one_bucket(), options(Mode::bsp), ps_hosts(1)), ConfigError);
}

}  // namespace
}  // namespace distml::sim
