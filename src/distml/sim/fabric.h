// Messages one at a time on the cluster's links, for strategies whose ranks do not move in
// rounds (the parameter server's workers push and pull when each is ready). The resources are
// those of network.h: each host's NIC out and in, each rack's uplink out and in, each host's
// memory for messages between its ranks. A message holds every resource on its path from the
// moment the last of them is free (first come, first served), each for its bytes over that
// resource's rate, and arrives a latency (and the engine's start-up, Cluster::p2p_overhead_s)
// after the slowest lets it go. NICs hold the token
// buckets of Links (Cluster::burst_bytes): what their tokens cover goes at the burst's rate.
#pragma once

#include <vector>

#include "distml/sim/cluster.h"
#include "distml/sim/network.h"

namespace distml::sim {

struct Transfer {
  double start_s = 0;   // when the message took its path
  double arrive_s = 0;  // when the receiver has it
};

class Fabric {
 public:
  explicit Fabric(const Cluster& cluster);
  /// `bytes` from rank `from`, ready at `ready_s`, to rank `to`. Messages must be sent in the
  /// order of their ready times (as an event loop sends them).
  Transfer send(double ready_s, int from, int to, double bytes);
  /// The bytes each host's NIC sent so far.
  const Traffic& traffic() const { return traffic_; }

 private:
  struct Resource {
    double rate = 0;    // bytes per second
    double burst = 0;   // token bucket's size (0: none)
    double free_s = 0;  // busy until
    double tokens = 0, tokens_at_s = 0;
    double seconds_for(double bytes, double at_s, double burst_rate) const;
    void hold(double bytes, double start_s, double seconds);
  };
  const Cluster& cluster_;
  std::vector<Resource> nic_out_, nic_in_, uplink_out_, uplink_in_, memory_;
  Traffic traffic_;
};

}  // namespace distml::sim
