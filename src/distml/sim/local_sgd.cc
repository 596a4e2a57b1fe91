#include "distml/sim/local_sgd.h"

#include <tuple>

#include "distml/comm/auto_policy.h"
#include "distml/sim/collectives.h"

namespace distml::sim {

StepPrediction predict_local_sgd_step(const Profile& profile, const LocalSgdOptions& options,
                                      const Cluster& cluster) {
  const double slow = compute_slowdown(profile, cluster);
  StepPrediction out;
  out.batches = cluster.world();
  out.compute_s = profile.compute_s() * slow;
  BucketReplay average;
  average.bytes = profile.gradient_bytes();  // the parameters, as many bytes as their gradients
  average.algorithm = comm::auto_allreduce_algorithm(options.engine, cluster.world(),
                                                     static_cast<std::size_t>(average.bytes),
                                                     cluster.hosts, cluster.ranks_per_host);
  const auto rounds = allreduce_rounds(average.algorithm, options.engine, average.bytes, cluster);
  average.ready_s = average.start_s = out.compute_s;
  // On links with a burst, the period's local steps are taken to have refilled it.
  average.end_s = average.start_s + Links(cluster).send(rounds);
  const double per_step = 1.0 / static_cast<double>(options.period);
  out.comm_s = out.exposed_comm_s = (average.end_s - average.start_s) * per_step;
  out.step_s = out.compute_s + out.comm_s;
  Traffic traffic;
  for (const auto& round : rounds) traffic.add(round, cluster);
  std::tie(out.busiest_host, out.bytes_per_link) = traffic.busiest();
  out.bytes_per_link *= per_step;
  out.buckets.push_back(average);
  return out;
}

}  // namespace distml::sim
