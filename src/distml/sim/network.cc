#include "distml/sim/network.h"

#include <algorithm>
#include <cmath>

namespace distml::sim {

namespace {

// Each resource's bytes in a round, and its slowest message's latency.
struct Load {
  std::vector<double> nic_out, nic_in, memory, uplink_out, uplink_in;
  double latency = 0;
};

Load load_of(const Round& round, const Cluster& cluster) {
  Load l{std::vector<double>(cluster.hosts), std::vector<double>(cluster.hosts),
         std::vector<double>(cluster.hosts), std::vector<double>(cluster.racks()),
         std::vector<double>(cluster.racks())};
  for (const auto& m : round.messages) {
    const int a = cluster.host_of(m.from), b = cluster.host_of(m.to);
    if (a == b) {
      l.memory[a] += m.bytes;
      l.latency = std::max(l.latency, cluster.within_host.latency_s);
      continue;
    }
    l.nic_out[a] += m.bytes;
    l.nic_in[b] += m.bytes;
    l.latency = std::max(l.latency, cluster.network.latency_s);
    if (cluster.rack_of(a) != cluster.rack_of(b)) {
      l.uplink_out[cluster.rack_of(a)] += m.bytes;
      l.uplink_in[cluster.rack_of(b)] += m.bytes;
    }
  }
  return l;
}

double busiest(const std::vector<double>& v) {
  return v.empty() ? 0.0 : *std::max_element(v.begin(), v.end());
}

// The seconds of a round whose NICs already hold `tokens_out` and `tokens_in` bytes' worth
// (null: none): the latency, then the busiest resource. What the tokens cover goes at the
// burst's rate, the rest at the link's.
double transfer_s(const Load& l, const Cluster& cluster, const std::vector<double>* tokens_out,
                  const std::vector<double>* tokens_in) {
  const double nic_rate = cluster.network.bytes_per_s;
  const auto nic_s = [&](double bytes, double tokens) {
    const double at_once = std::min(bytes, tokens);
    return at_once / cluster.burst_bytes_per_s + (bytes - at_once) / nic_rate;
  };
  double nic = 0;
  for (int h = 0; h < cluster.hosts; ++h)
    nic = std::max({nic, nic_s(l.nic_out[h], tokens_out ? (*tokens_out)[h] : 0),
                    nic_s(l.nic_in[h], tokens_in ? (*tokens_in)[h] : 0)});
  const double uplink_rate =
      nic_rate * std::max(1, cluster.hosts_per_rack) / std::max(1.0, cluster.oversubscription);
  return l.latency +
         std::max({nic, busiest(l.uplink_out) / uplink_rate, busiest(l.uplink_in) / uplink_rate,
                   busiest(l.memory) / cluster.within_host.bytes_per_s});
}

}  // namespace

double round_s(const Round& round, const Cluster& cluster) {
  return transfer_s(load_of(round, cluster), cluster, nullptr, nullptr);
}

double rounds_s(const std::vector<Round>& rounds, const Cluster& cluster) {
  double total = 0;
  for (const auto& round : rounds) total += round.repeat * round_s(round, cluster);
  return total;
}

Links::Links(const Cluster& cluster)
    : cluster_(cluster),
      tokens_out_(cluster.hosts, cluster.burst_bytes),
      tokens_in_(cluster.hosts, cluster.burst_bytes) {}

void Links::idle(double seconds) {
  const double refill = seconds * cluster_.network.bytes_per_s;
  for (auto* tokens : {&tokens_out_, &tokens_in_})
    for (double& t : *tokens) t = std::min(cluster_.burst_bytes, t + refill);
}

double Links::send_once(const Round& round) {
  const Load l = load_of(round, cluster_);
  const double seconds = transfer_s(l, cluster_, &tokens_out_, &tokens_in_);
  const double refill = seconds * cluster_.network.bytes_per_s;
  for (int h = 0; h < cluster_.hosts; ++h) {
    tokens_out_[h] = std::clamp(tokens_out_[h] - l.nic_out[h] + refill, 0.0, cluster_.burst_bytes);
    tokens_in_[h] = std::clamp(tokens_in_[h] - l.nic_in[h] + refill, 0.0, cluster_.burst_bytes);
  }
  return seconds;
}

double Links::send(const std::vector<Round>& rounds) {
  if (cluster_.burst_bytes <= 0) return rounds_s(rounds, cluster_);
  double total = 0;
  for (const auto& round : rounds) {
    // Once a repeat leaves the buckets as it found them, every later one takes its time.
    for (int i = 0; i < round.repeat; ++i) {
      const auto before = tokens();
      const double seconds = send_once(round);
      total += seconds;
      if (same_tokens(before)) {
        total += (round.repeat - i - 1) * seconds;
        break;
      }
    }
  }
  return total;
}

std::vector<double> Links::tokens() const {
  std::vector<double> all = tokens_out_;
  all.insert(all.end(), tokens_in_.begin(), tokens_in_.end());
  return all;
}

bool Links::same_tokens(const std::vector<double>& before) const {
  const auto now = tokens();
  for (std::size_t i = 0; i < now.size(); ++i)
    if (std::abs(now[i] - before[i]) > 1e-9 * cluster_.burst_bytes) return false;
  return true;
}

void Traffic::add(const Round& round, const Cluster& cluster) {
  sent_by_host.resize(cluster.hosts);
  for (const auto& m : round.messages)
    if (cluster.host_of(m.from) != cluster.host_of(m.to))
      sent_by_host[cluster.host_of(m.from)] += round.repeat * m.bytes;
}

std::pair<int, double> Traffic::busiest() const {
  std::pair<int, double> most{0, 0.0};
  for (std::size_t h = 0; h < sent_by_host.size(); ++h)
    if (sent_by_host[h] > most.second) most = {static_cast<int>(h), sent_by_host[h]};
  return most;
}

}  // namespace distml::sim
