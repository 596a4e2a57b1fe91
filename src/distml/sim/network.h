// Messages on the cluster's links, a round at a time: the analytical network model of
// ASTRA-sim's first backend, which its authors found within 3-11% of real all-reduces.
//
// A round is a set of messages sent at the same moment (one step of a collective: every rank
// sends to its ring neighbour, or to its partner at distance d). It takes
//     max over messages of their path's latency + max over resources of bytes / rate,
// where the resources are each host's NIC (out and in), each rack's uplink (out and in) and
// each host's memory (the copies between its ranks). So messages that share a NIC share its
// bandwidth, and a round is as slow as its busiest link.
#pragma once

#include <utility>
#include <vector>

#include "distml/sim/cluster.h"

namespace distml::sim {

struct Message {
  int from = 0, to = 0;  // ranks
  double bytes = 0;
};

/// Messages sent together, `repeat` times one after another (a ring's 2(n-1) equal steps).
struct Round {
  std::vector<Message> messages;
  int repeat = 1;
};

/// Bytes that crossed each host's NIC (out), counted over rounds.
struct Traffic {
  std::vector<double> sent_by_host;
  void add(const Round& round, const Cluster& cluster);
  /// The host that sent the most (the first of equals), and its bytes; {0, 0} for none.
  std::pair<int, double> busiest() const;
};

/// Seconds of one repetition of `round` on `cluster`, its links' buckets empty (or no burst).
double round_s(const Round& round, const Cluster& cluster);

/// Seconds of the rounds one after another (each times its repeat), as round_s.
double rounds_s(const std::vector<Round>& rounds, const Cluster& cluster);

/// The cluster's links through a run, for links with a burst (Cluster::burst_bytes): each host
/// NIC's two directions hold a token bucket of burst_bytes, refilled at the link's rate. A
/// round's bytes go at once as far as a NIC's tokens reach, the rest at the rate; the tokens
/// then refill for the round's time. Time without traffic (idle) refills them too. Without a
/// burst every round takes round_s.
/// Steps a replay runs at most on links with a burst before it takes the last step as every
/// step's (the tokens reach their steady state well within it).
constexpr int kMaxReplayedSteps = 200;

class Links {
 public:
  explicit Links(const Cluster& cluster);  // the buckets full
  /// Seconds of the rounds one after another, each times its repeat.
  double send(const std::vector<Round>& rounds);
  void idle(double seconds);
  /// Every NIC's tokens (out, then in), and whether they are as in `before` (to within a
  /// billionth of the burst): a repeated round or step has reached its steady state.
  std::vector<double> tokens() const;
  bool same_tokens(const std::vector<double>& before) const;

 private:
  double send_once(const Round& round);
  const Cluster& cluster_;
  std::vector<double> tokens_out_, tokens_in_;
};

}  // namespace distml::sim
