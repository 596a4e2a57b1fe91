#include "distml/sim/fabric.h"

#include <algorithm>

namespace distml::sim {

// With tokens refilled since they were last counted, what they cover goes at the burst's rate
// and the rest at the resource's (network.cc's transfer_s for one message).
double Fabric::Resource::seconds_for(double bytes, double at_s, double burst_rate) const {
  if (burst <= 0) return bytes / rate;
  const double now = std::min(burst, tokens + (at_s - tokens_at_s) * rate);
  const double at_once = std::min(bytes, now);
  return at_once / burst_rate + (bytes - at_once) / rate;
}

void Fabric::Resource::hold(double bytes, double start_s, double seconds) {
  free_s = start_s + seconds;
  if (burst <= 0) return;
  const double now = std::min(burst, tokens + (start_s - tokens_at_s) * rate);
  tokens = std::clamp(now - bytes + seconds * rate, 0.0, burst);
  tokens_at_s = free_s;
}

Fabric::Fabric(const Cluster& cluster) : cluster_(cluster) {
  const double nic = cluster.network.bytes_per_s;
  const Resource card{nic, cluster.burst_bytes, 0, cluster.burst_bytes, 0};
  nic_out_.assign(cluster.hosts, card);
  nic_in_.assign(cluster.hosts, card);
  const double uplink =
      nic * std::max(1, cluster.hosts_per_rack) / std::max(1.0, cluster.oversubscription);
  uplink_out_.assign(cluster.racks(), Resource{uplink});
  uplink_in_.assign(cluster.racks(), Resource{uplink});
  memory_.assign(cluster.hosts, Resource{cluster.within_host.bytes_per_s});
  traffic_.sent_by_host.assign(cluster.hosts, 0);
}

Transfer Fabric::send(double ready_s, int from, int to, double bytes) {
  const int a = cluster_.host_of(from), b = cluster_.host_of(to);
  std::vector<Resource*> path;
  double latency = cluster_.within_host.latency_s;
  if (a == b) {
    path = {&memory_[a]};
  } else {
    path = {&nic_out_[a], &nic_in_[b]};
    if (cluster_.rack_of(a) != cluster_.rack_of(b))
      path.insert(path.end(),
                  {&uplink_out_[cluster_.rack_of(a)], &uplink_in_[cluster_.rack_of(b)]});
    latency = cluster_.network.latency_s;
    traffic_.sent_by_host[a] += bytes;
  }
  double start = ready_s;
  for (const Resource* r : path) start = std::max(start, r->free_s);
  double slowest = 0;
  for (Resource* r : path) {
    const double seconds = r->seconds_for(bytes, start, cluster_.burst_bytes_per_s);
    r->hold(bytes, start, seconds);
    slowest = std::max(slowest, seconds);
  }
  return {start, start + slowest + latency + cluster_.p2p_overhead_s};
}

}  // namespace distml::sim
