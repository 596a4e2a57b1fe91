#include "distml/sim/gossip.h"

#include <algorithm>
#include <tuple>

#include "distml/sim/network.h"
#include "distml/train/strategies/gossip_topology.h"

namespace distml::sim {

StepPrediction predict_gossip_step(const Profile& profile, const std::string& topology,
                                   const Cluster& cluster) {
  const int world = cluster.world();
  const auto offsets = world > 1
                           ? train::gossip_offsets(train::parse_gossip_topology(topology), world)
                           : std::vector<int>{};
  const double slow = compute_slowdown(profile, cluster);
  const double bytes = profile.gradient_bytes();  // the parameters: as many as their gradients
  const double computed =                         // 2.
      (profile.data_s + profile.forward_s + profile.backward_s + profile.optimizer_s) * slow;
  double copy_s = 0;  // 3.
  if (!profile.layers.empty())
    for (const auto& layer : profile.layers_at(profile.batch_size)) copy_s += layer.copy_s;
  const double k = static_cast<double>(offsets.size());
  const double mix_s = offsets.empty() ? 0 : (k + 2) * copy_s * slow;
  StepPrediction out;
  out.batches = world;
  out.compute_s = profile.compute_s() * slow + mix_s;
  out.step_s = out.compute_s;
  if (offsets.empty()) return out;
  // 1. Every rank's messages in one round, from the step's start after loading. On links with
  // a burst the steps are replayed until one leaves the links' tokens as it found them.
  Round round;
  for (int r = 0; r < world; ++r)
    for (int d : offsets) round.messages.push_back({r, ((r + d) % world + world) % world, bytes});
  const double start_s = profile.data_s * slow;
  Links links(cluster);
  for (int step = 0; step < kMaxReplayedSteps; ++step) {
    const auto tokens = links.tokens();
    const double on_links = links.send({round});
    out.comm_s = on_links + k * cluster.p2p_overhead_s;
    out.exposed_comm_s = std::max(0.0, start_s + out.comm_s - computed);
    out.step_s = std::max(computed, start_s + out.comm_s) + mix_s + profile.other_s * slow;
    if (cluster.burst_bytes <= 0) break;
    links.idle(out.step_s - on_links);  // until the next step's exchange
    if (links.same_tokens(tokens)) break;
  }
  Traffic traffic;
  traffic.add(round, cluster);
  std::tie(out.busiest_host, out.bytes_per_link) = traffic.busiest();
  return out;
}

}  // namespace distml::sim
