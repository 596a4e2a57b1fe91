#include "distml/sim/network.h"

#include <algorithm>

namespace distml::sim {

double round_s(const Round& round, const Cluster& cluster) {
  std::vector<double> nic_out(cluster.hosts), nic_in(cluster.hosts), memory(cluster.hosts);
  std::vector<double> uplink_out(cluster.racks()), uplink_in(cluster.racks());
  double latency = 0;
  for (const auto& m : round.messages) {
    const int a = cluster.host_of(m.from), b = cluster.host_of(m.to);
    if (a == b) {
      memory[a] += m.bytes;
      latency = std::max(latency, cluster.within_host.latency_s);
      continue;
    }
    nic_out[a] += m.bytes;
    nic_in[b] += m.bytes;
    latency = std::max(latency, cluster.network.latency_s);
    if (cluster.rack_of(a) != cluster.rack_of(b)) {
      uplink_out[cluster.rack_of(a)] += m.bytes;
      uplink_in[cluster.rack_of(b)] += m.bytes;
    }
  }
  const auto busiest = [](const std::vector<double>& v) {
    return v.empty() ? 0.0 : *std::max_element(v.begin(), v.end());
  };
  const double nic_rate = cluster.network.bytes_per_s;
  const double uplink_rate =
      nic_rate * std::max(1, cluster.hosts_per_rack) / std::max(1.0, cluster.oversubscription);
  const double transfer = std::max(
      {busiest(nic_out) / nic_rate, busiest(nic_in) / nic_rate, busiest(uplink_out) / uplink_rate,
       busiest(uplink_in) / uplink_rate, busiest(memory) / cluster.within_host.bytes_per_s});
  return latency + transfer;
}

double rounds_s(const std::vector<Round>& rounds, const Cluster& cluster) {
  double total = 0;
  for (const auto& round : rounds) total += round.repeat * round_s(round, cluster);
  return total;
}

void Traffic::add(const Round& round, const Cluster& cluster) {
  sent_by_host.resize(cluster.hosts);
  for (const auto& m : round.messages)
    if (cluster.host_of(m.from) != cluster.host_of(m.to))
      sent_by_host[cluster.host_of(m.from)] += round.repeat * m.bytes;
}

}  // namespace distml::sim
