// Gossip's neighbours (gossip_strategy.h), without the strategy: what the simulator and the
// Python module need of it, without torch.
#pragma once

#include <string>
#include <vector>

#include "distml/core/error.h"

namespace distml::train {

enum class GossipTopology { ring, exponential, complete };

/// ring | exponential | complete; UsageError otherwise.
inline GossipTopology parse_gossip_topology(const std::string& name) {
  if (name == "ring") return GossipTopology::ring;
  if (name == "exponential") return GossipTopology::exponential;
  if (name == "complete") return GossipTopology::complete;
  throw UsageError(cat("unknown gossip topology '", name, "' (ring, exponential, complete)"));
}

/// The offsets d of `topology` over `world` ranks: rank r sends to r + d, receives from r - d.
inline std::vector<int> gossip_offsets(GossipTopology topology, int world) {
  std::vector<int> d;
  switch (topology) {
    case GossipTopology::ring:
      if (world >= 2) d.push_back(1);
      if (world >= 3) d.push_back(world - 1);
      break;
    case GossipTopology::exponential:
      for (int hop = 1; hop < world; hop *= 2) d.push_back(hop);
      break;
    case GossipTopology::complete:
      for (int hop = 1; hop < world; ++hop) d.push_back(hop);
      break;
  }
  return d;
}

}  // namespace distml::train
