#include "elastic_hosts.h"

#include <algorithm>
#include <cstdio>
#include <numeric>

#include "distml/core/error.h"

namespace distml::cli {

ElasticHosts::ElasticHosts(std::vector<HostSlots> hosts, std::string discovery, int max_np,
                           bool other_hosts)
    : hosts_(std::move(hosts)),
      discovery_(std::move(discovery)),
      max_np_(max_np),
      other_hosts_(other_hosts) {}

int ElasticHosts::ranks(const std::vector<HostSlots>& world) {
  return std::accumulate(world.begin(), world.end(), 0,
                         [](int n, const HostSlots& h) { return n + h.slots; });
}

// The discovery script's hosts (those the job was given in its order, each with the slots the
// script gives or the host's own, then the others in the script's order), or every host.
std::vector<HostSlots> ElasticHosts::available() const {
  if (discovery_.empty()) return hosts_;
  const auto listed = discover_hosts(discovery_);
  std::vector<HostSlots> out, others;
  for (const auto& l : listed) {
    const auto known = std::find_if(hosts_.begin(), hosts_.end(),
                                    [&](const HostSlots& h) { return h.host == l.host; });
    if (known == hosts_.end() && other_hosts_) {
      others.push_back({l.host, l.slots > 0 ? l.slots : 1});
    } else if (known == hosts_.end()) {
      std::string names;
      for (const auto& h : hosts_) names += (names.empty() ? "" : ", ") + h.host;
      throw UsageError(cat("host discovery script ", discovery_, " lists host '", l.host,
                           "', which is not one of the job's: ", names));
    }
  }
  for (const auto& h : hosts_) {
    const auto l = std::find_if(listed.begin(), listed.end(),
                                [&](const HostSlots& x) { return x.host == h.host; });
    if (l != listed.end()) out.push_back({h.host, l->slots > 0 ? l->slots : h.slots});
  }
  out.insert(out.end(), others.begin(), others.end());
  return out;
}

std::vector<HostSlots> ElasticHosts::world() const {
  std::vector<HostSlots> world;
  int np = 0;
  for (auto h : available()) {
    if (lost_.count(h.host)) continue;
    if (max_np_ > 0) h.slots = std::min(h.slots, max_np_ - np);
    if (h.slots <= 0) break;
    np += h.slots;
    world.push_back(h);
  }
  return world;
}

void ElasticHosts::lost(const std::string& host) { lost_.insert(host); }

std::string ElasticHosts::joining(const std::vector<HostSlots>& running) {
  if (discovery_.empty() || (max_np_ > 0 && ranks(running) >= max_np_)) return {};
  std::vector<HostSlots> now;
  try {
    now = available();
  } catch (const std::exception& e) {
    if (!warned_) std::fprintf(stderr, "distml launch: %s; the job goes on as it is\n", e.what());
    warned_ = true;
    return {};
  }
  for (const auto& h : now) {
    const bool runs = std::any_of(running.begin(), running.end(),
                                  [&](const HostSlots& r) { return r.host == h.host; });
    if (runs) continue;
    lost_.erase(h.host);
    return h.host;
  }
  return {};
}

}  // namespace distml::cli
