#include "distml/train/strategies/ps_protocol.h"

#include <algorithm>

#include "distml/core/error.h"
#include "distml/train/bucket_planner.h"

namespace distml::train::ps {

Mode parse_mode(const std::string& name) {
  if (name == "bsp") return Mode::bsp;
  if (name == "asp") return Mode::asp;
  if (name == "ssp") return Mode::ssp;
  throw ConfigError(cat("strategy.mode: expected bsp, asp or ssp, got '", name, "'"));
}

Layout Layout::plan(const std::vector<std::size_t>& param_bytes,
                    const std::vector<std::size_t>& param_elements, int workers, int servers,
                    std::size_t first_cap, std::size_t cap) {
  Layout l;
  l.workers = workers;
  l.servers = servers;
  l.buckets = plan_buckets(param_bytes, first_cap, cap).buckets;
  l.server_bytes.assign(servers, 0);
  for (const auto& bucket : l.buckets) {
    std::size_t bytes = 0, elements = 0;
    for (std::size_t p : bucket) {
      bytes += param_bytes[p];
      elements += param_elements[p];
    }
    const auto lightest = std::min_element(l.server_bytes.begin(), l.server_bytes.end());
    l.server_of.push_back(static_cast<int>(lightest - l.server_bytes.begin()));
    *lightest += bytes;
    l.elements.push_back(elements);
  }
  return l;
}

std::vector<std::size_t> Layout::buckets_of(int s) const {
  std::vector<std::size_t> out;
  for (std::size_t b = 0; b < buckets.size(); ++b)
    if (server_of[b] == s) out.push_back(b);
  return out;
}

}  // namespace distml::train::ps
