// Messages on the cluster's links as flows that share them, for strategies whose ranks do not
// move in rounds (the parameter server's workers push and pull when each is ready). The
// resources are those of network.h: each host's NIC out and in, each rack's uplink out and in,
// each host's memory for messages between its ranks. Flows that cross a resource share it
// max-min fairly, as TCP's connections share a link: each gets an equal share of its
// bottleneck, and what a flow held back elsewhere leaves is shared among the others
// (progressive filling). Messages between the same two ranks go one after another, as over
// one connection (the engines keep one per pair of ranks). A NIC holds the token bucket of Links
// (Cluster::burst_bytes): while it has tokens it carries the burst's rate, and the tokens drain by
// what goes over its own rate and refill by what stays under it. A message arrives a latency, and
// the engine's start-up (Cluster::p2p_overhead_s), after its last byte has left.
#pragma once

#include <deque>
#include <functional>
#include <map>
#include <utility>
#include <vector>

#include "distml/sim/cluster.h"
#include "distml/sim/events.h"
#include "distml/sim/network.h"

namespace distml::sim {

class Fabric {
 public:
  Fabric(const Cluster& cluster, Events& events);
  /// `bytes` from rank `from` to rank `to`, starting now; `arrived` runs when `to` has them.
  void send(int from, int to, double bytes, std::function<void()> arrived);
  /// The bytes each host's NIC sent so far.
  const Traffic& traffic() const { return traffic_; }

 private:
  struct Resource {
    double rate = 0;        // bytes per second
    double burst = 0;       // token bucket's size (0: none)
    double burst_rate = 0;  // while it holds tokens
    double tokens = 0;
    double counted_at = 0;  // when `tokens` was last brought up to date
    double used = 0;        // the flows' rates through it, now
    double capacity() const { return burst > 0 && tokens > 1e-6 * burst ? burst_rate : rate; }
  };
  struct Flow {
    std::pair<int, int> ranks;  // from, to
    std::vector<int> path;      // resources
    double left = 0;            // bytes still to leave
    double rate = 0;
    double latency = 0;
    std::function<void()> arrived;
  };
  void start(Flow flow);
  void progress();           // to now: bytes sent, the busy resources' tokens spent or refilled
  void settle(Resource& r);  // its tokens to now, at its current use
  void share();              // the flows' max-min fair rates, and the next moment they change
  void check(long generation);

  const Cluster& cluster_;
  Events& events_;
  std::vector<Resource> resources_;
  std::vector<double> left_;  // share(): each resource's capacity not yet given out
  std::vector<int> count_;    // share(): the flows through it not yet given a rate
  std::vector<int> busy_;     // the resources some flow crosses (a cluster has thousands)
  std::vector<Flow> flows_;   // sending now
  std::map<std::pair<int, int>, std::deque<Flow>> queued_;  // behind one between their ranks
  double updated_ = 0;
  long generation_ = 0;
  bool share_due_ = false;  // a share() is scheduled for now
  Traffic traffic_;
};

}  // namespace distml::sim
