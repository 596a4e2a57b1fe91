// The simulator's collectives against their closed forms (α latency, β bandwidth, S bytes, n
// ranks): the rounds of distml's algorithms on the network model must add up to the textbook
// costs where the textbook's assumptions hold (one rank per host, a non-blocking switch).
#include "distml/sim/collectives.h"

#include <gtest/gtest.h>

#include <cmath>

namespace distml::sim {
namespace {

using comm::Algorithm;

constexpr double kAlpha = 30e-6, kBeta = 125e6, kBytes = 8 << 20;

Cluster hosts(int n, int ranks_per_host = 1) {
  Cluster c;
  c.hosts = n;
  c.ranks_per_host = ranks_per_host;
  c.network = {kAlpha, kBeta};
  return c;
}

double seconds(Algorithm a, const Cluster& c, double bytes = kBytes) {
  return rounds_s(allreduce_rounds(a, "gloo", bytes, c), c);
}

// Each time is at most a few dozen sums and products of positive doubles, each off by at most
// 2^-53 of its result: together under 1e-14 of it. 1e-12 leaves room; a wrong round count or
// size is off by 1e-2 and more.
void expect_close(double got, double want) { EXPECT_NEAR(got, want, want * 1e-12); }

TEST(Collectives, RingIsTwoNMinusOneStepsOfABlock) {
  for (int n : {2, 3, 5, 8}) {
    SCOPED_TRACE(n);
    expect_close(seconds(Algorithm::ring, hosts(n)),
                 2.0 * (n - 1) / n * kBytes / kBeta + 2.0 * (n - 1) * kAlpha);
  }
}

TEST(Collectives, HalvingDoublingOnAPowerOfTwo) {
  for (int n : {2, 4, 8, 16}) {
    SCOPED_TRACE(n);
    expect_close(seconds(Algorithm::halving_doubling, hosts(n)),
                 2 * std::log2(n) * kAlpha + 2.0 * (n - 1) / n * kBytes / kBeta);
  }
}

TEST(Collectives, HalvingDoublingFoldsTheRanksAboveAPowerOfTwo) {
  // The extra ranks hand their whole vector over and get the result back: two more steps of S.
  for (int n : {3, 5, 6, 7}) {
    SCOPED_TRACE(n);
    const int p = 1 << static_cast<int>(std::floor(std::log2(n)));
    expect_close(seconds(Algorithm::halving_doubling, hosts(n)),
                 2 * (kAlpha + kBytes / kBeta) + 2 * std::log2(p) * kAlpha +
                     2.0 * (p - 1) / p * kBytes / kBeta);
  }
}

TEST(Collectives, BinomialTreeIsTwoLogNHandOffsOfTheWholeVector) {
  for (int n : {2, 3, 4, 7}) {
    SCOPED_TRACE(n);
    expect_close(seconds(Algorithm::tree, hosts(n)),
                 2 * std::ceil(std::log2(n)) * (kAlpha + kBytes / kBeta));
  }
}

TEST(Collectives, HierarchicalAtTwoLevels) {
  // Within a host a reduce-scatter and an all-gather through memory, (R - 1) S bytes each;
  // across the hosts R rings of S / R side by side, sharing each NIC: 2 (H - 1) steps of S / H.
  for (auto [h, r] : {std::pair{2, 2}, {3, 4}, {4, 2}}) {
    SCOPED_TRACE(testing::Message() << h << "x" << r);
    const Cluster c = hosts(h, r);
    const LinkCost m = c.within_host;
    expect_close(seconds(Algorithm::hierarchical, c),
                 2 * (m.latency_s + (r - 1) * kBytes / m.bytes_per_s) +
                     2.0 * (h - 1) * (kAlpha + kBytes / h / kBeta));
  }
}

TEST(Collectives, AnOversubscribedUplinkSlowsTheStepsThatCrossRacks) {
  // 4 hosts, 2 per rack: the ring's steps each send one block across each rack's uplink.
  // Oversubscribed 4:1, the uplink carries 2 NICs' worth / 4 = half a NIC: each step's block
  // takes twice as long. At 2:1 the uplink carries a NIC's worth, as much as one block needs.
  Cluster c = hosts(4);
  c.hosts_per_rack = 2;
  c.oversubscription = 4;
  expect_close(seconds(Algorithm::ring, c), 6 * (kAlpha + 2 * kBytes / 4 / kBeta));
  c.oversubscription = 2;
  expect_close(seconds(Algorithm::ring, c), seconds(Algorithm::ring, hosts(4)));
}

TEST(Collectives, OneRankSendsNothing) {
  EXPECT_EQ(seconds(Algorithm::ring, hosts(1)), 0);
  EXPECT_TRUE(allreduce_rounds(Algorithm::native, "mpi", kBytes, hosts(1)).empty());
}

TEST(Collectives, NativeIsTheEnginesOwn) {
  // MPI: recursive doubling of the whole vector below 10,000 bytes, a ring above; gloo: a ring.
  expect_close(rounds_s(allreduce_rounds(Algorithm::native, "mpi", 4096, hosts(4)), hosts(4)),
               2 * (kAlpha + 4096 / kBeta));
  expect_close(seconds(Algorithm::native, hosts(4)), seconds(Algorithm::ring, hosts(4)));
}

TEST(Links, ABurstPassesAtOnceThenTheRateRefillsIt) {
  // 2 hosts, 1 ms latency, 100 bytes/ms, a 500-byte burst. A ring of 2 sends S/2 a host per
  // step, 2 steps. Worked by hand: tokens after a step = tokens - sent + 100 x its ms.
  Cluster c = hosts(2);
  c.network = {1e-3, 1e5};
  c.burst_bytes = 500;
  Links links(c);
  const auto ring = [&](double bytes) {
    return allreduce_rounds(Algorithm::ring, "gloo", bytes, c);
  };
  // 200 a step from 500 tokens: latency only, 1 + 1 ms; tokens 400, then 300.
  EXPECT_NEAR(links.send(ring(400)), 0.002, 1e-15);
  // 1000 a step: (1000 - 300) / 100 + 1 = 8 ms, tokens 100; (1000 - 100) / 100 + 1 = 10 ms.
  EXPECT_NEAR(links.send(ring(2000)), 0.018, 1e-15);
  // 2 ms idle: 300 tokens; 200 a step: 1 ms, tokens 200; 1 ms.
  links.idle(0.002);
  EXPECT_NEAR(links.send(ring(400)), 0.002, 1e-15);
  // A burst at 1000 bytes/ms rather than at once: each 200-byte step 0.2 ms more.
  Cluster paced = c;
  paced.burst_bytes_per_s = 1e6;
  EXPECT_NEAR(Links(paced).send(ring(400)), 0.0024, 1e-15);
  // Without a burst, Links is round_s: 2 steps of 1 ms + 10 ms.
  c.burst_bytes = 0;
  EXPECT_NEAR(Links(c).send(ring(2000)), 0.022, 1e-15);
}

}  // namespace
}  // namespace distml::sim
