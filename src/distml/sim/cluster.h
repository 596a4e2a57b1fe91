// The cluster a simulation runs on (docs/simulator.md): hosts of ranks; each host's network
// card (NIC) on a switch; with racks, each rack's switch joined to the others by an uplink that
// may be oversubscribed (its hosts' NICs together can send more than it carries).
#pragma once

namespace distml::sim {

/// A link's latency α (one way, seconds) and bandwidth β (bytes per second, per direction).
struct LinkCost {
  double latency_s = 0;
  double bytes_per_s = 1e300;
};

struct Cluster {
  int hosts = 1;
  int ranks_per_host = 1;
  LinkCost network;  // each host's NIC: between hosts
  // A link shaped by a token bucket (tc tbf, as distml launch --netns-cluster shapes its
  // emulated hosts') passes this many bytes at the wire's speed (burst_bytes_per_s) after
  // idling, then its rate; 0: a plain link, always at its rate.
  double burst_bytes = 0;
  double burst_bytes_per_s = 1e300;
  // Between the ranks of one host, through shared memory: a copy's start-up and the host's
  // memory bandwidth, shared by all its ranks' copies (distml simulate --host-latency,
  // --host-bandwidth; assumed, not measured).
  LinkCost within_host{2e-6, 5e9};
  // A point-to-point message's start-up in the engine, beyond the link's latency (the
  // parameter server's and pipelines' messages; collectives' rounds have their own).
  double p2p_overhead_s = 0;
  int hosts_per_rack = 0;       // 0: one switch for every host
  double oversubscription = 1;  // a rack's NICs' rate over its uplink's (1: none)
  // > 0: every rank of the cluster computes on these cores, shared (emulated hosts on one
  // machine); 0: each host has cores enough for its ranks, as on a real cluster.
  double shared_cores = 0;

  int world() const { return hosts * ranks_per_host; }
  /// Ranks are placed host by host, as distml launch places them.
  int host_of(int rank) const { return rank / ranks_per_host; }
  int rack_of(int host) const { return hosts_per_rack > 0 ? host / hosts_per_rack : 0; }
  int racks() const {
    return hosts_per_rack > 0 ? (hosts + hosts_per_rack - 1) / hosts_per_rack : 1;
  }
};

}  // namespace distml::sim
