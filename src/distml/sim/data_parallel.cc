#include "distml/sim/data_parallel.h"

#include <algorithm>

#include "distml/comm/auto_policy.h"
#include "distml/sim/collectives.h"
#include "distml/train/bucket_planner.h"

namespace distml::sim {

double compute_slowdown(const Profile& profile, const Cluster& cluster) {
  const double had = std::min(profile.threads, profile.cores);
  const double has = cluster.shared_cores > 0
                         ? std::min<double>(profile.threads, cluster.shared_cores / cluster.world())
                         : profile.threads;
  return std::max(1.0, had / has);
}

StepPrediction predict_allreduce_step(const Profile& profile, const AllreduceOptions& options,
                                      const Cluster& cluster) {
  const double slow = compute_slowdown(profile, cluster);
  std::vector<std::size_t> bytes;
  for (const auto& p : profile.parameters) bytes.push_back(static_cast<std::size_t>(p.bytes));
  const auto plan = train::plan_buckets(bytes, static_cast<std::size_t>(options.first_bucket_bytes),
                                        static_cast<std::size_t>(options.bucket_bytes));

  StepPrediction out;
  const double backward_start = (profile.data_s + profile.forward_s) * slow;
  const double backward_end = backward_start + profile.backward_s * slow;
  Traffic traffic;
  double free_at = 0;  // the communication thread
  for (const auto& bucket : plan.buckets) {
    BucketReplay b;
    b.bytes = options.flag_bytes;
    double ready = 0;
    for (auto i : bucket) {
      b.bytes += profile.parameters[i].bytes;
      ready = std::max(ready, profile.parameters[i].ready_s);
    }
    b.ready_s = options.overlap ? backward_start + ready * slow : backward_end;
    const double sent = b.bytes * options.compression;
    b.algorithm = options.algorithm != comm::Algorithm::automatic
                      ? options.algorithm
                      : comm::auto_allreduce_algorithm(options.engine, cluster.world(),
                                                       static_cast<std::size_t>(sent),
                                                       cluster.hosts, cluster.ranks_per_host);
    const auto rounds = allreduce_rounds(b.algorithm, options.engine, sent, cluster);
    b.start_s = std::max(b.ready_s, free_at);
    b.end_s = b.start_s + rounds_s(rounds, cluster);
    free_at = b.end_s;
    out.comm_s += b.end_s - b.start_s;
    for (const auto& round : rounds) traffic.add(round, cluster);
    out.buckets.push_back(b);
  }
  const double synced = std::max(backward_end, free_at);
  out.exposed_comm_s = synced - backward_end;
  const double after = (profile.optimizer_s + profile.other_s) * slow;
  out.compute_s = (profile.data_s + profile.forward_s + profile.backward_s) * slow + after;
  out.step_s = synced + after;
  for (std::size_t h = 0; h < traffic.sent_by_host.size(); ++h)
    if (traffic.sent_by_host[h] > out.bytes_per_link) {
      out.bytes_per_link = traffic.sent_by_host[h];
      out.busiest_host = static_cast<int>(h);
    }
  return out;
}

}  // namespace distml::sim
