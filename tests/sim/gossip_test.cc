// Gossip's step (sim/gossip.h) against its timeline worked out by hand.
#include "distml/sim/gossip.h"

#include <gtest/gtest.h>

#include <tuple>

namespace distml::sim {
namespace {

// Loading 1 ms, forward 2, backward 4, optimizer 1, bookkeeping 0.5; 1000 bytes of
// parameters; no layers (the mix is not costed).
Profile gossip_toy() {
  Profile p;
  p.data_s = 1e-3;
  p.forward_s = 2e-3;
  p.backward_s = 4e-3;
  p.optimizer_s = 1e-3;
  p.other_s = 0.5e-3;
  p.parameters = {{.name = "w", .bytes = 1000}};
  return p;
}

// Hosts of one rank, alpha 1 ms, beta 1e5 bytes/s. The exchange starts after loading (1 ms)
// and each NIC carries 1000 bytes per neighbour each way: alone on 2 ranks, two on a ring of
// 3, three on the exponential graph of 8 (offsets 1, 2, 4). It ends at 1 + 1 + 10 k ms, after
// the 8 ms of computing, and the step adds the bookkeeping: 12.5, 22.5 and 32.5 ms.
TEST(Gossip, ExchangeOverlapsTheComputeAndEndsTheStep) {
  for (auto [topology, hosts, k] :
       {std::tuple{"ring", 2, 1}, std::tuple{"ring", 3, 2}, std::tuple{"exponential", 8, 3}}) {
    Cluster c;
    c.hosts = hosts;
    c.network = {1e-3, 1e5};
    const auto p = predict_gossip_step(gossip_toy(), topology, c);
    SCOPED_TRACE(testing::Message() << topology << " on " << hosts);
    // Sums of a few milliseconds: a few ulps.
    EXPECT_NEAR(p.step_s, 2e-3 + 10e-3 * k + 0.5e-3, 1e-15);
    EXPECT_NEAR(p.exposed_comm_s, 2e-3 + 10e-3 * k - 8e-3, 1e-15);
    EXPECT_EQ(p.bytes_per_link, 1000.0 * k);
    // Each message's start-up in the engine, one after another: k of them.
    c.p2p_overhead_s = 1e-4;
    EXPECT_NEAR(predict_gossip_step(gossip_toy(), topology, c).step_s - p.step_s, 1e-4 * k, 1e-15);
  }
  // One rank alone: nothing to exchange.
  Cluster alone;
  EXPECT_NEAR(predict_gossip_step(gossip_toy(), "ring", alone).step_s, 8.5e-3, 1e-15);
}

}  // namespace
}  // namespace distml::sim
