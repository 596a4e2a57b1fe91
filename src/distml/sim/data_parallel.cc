#include "distml/sim/data_parallel.h"

#include <algorithm>
#include <cmath>
#include <tuple>

#include "distml/comm/auto_policy.h"
#include "distml/sim/collectives.h"
#include "distml/train/bucket_planner.h"

namespace distml::sim {

double compute_slowdown(const Profile& profile, const Cluster& cluster, int computing) {
  const double had = std::min(profile.threads, profile.cores);
  const int ranks = computing > 0 ? computing : cluster.world();
  const double has = cluster.shared_cores > 0
                         ? std::min<double>(profile.threads, cluster.shared_cores / ranks)
                         : profile.threads;
  return std::max(1.0, had / has);
}

double one_rank_step_s(const Profile& profile, const Cluster& cluster) {
  Cluster alone = cluster;
  alone.hosts = alone.ranks_per_host = 1;
  return profile.compute_s() * compute_slowdown(profile, alone);
}

// Steps replayed at most, on links with a burst, before the last one is taken as every step's.
constexpr int kMaxSteps = 200;

StepPrediction predict_allreduce_step(const Profile& profile, const AllreduceOptions& options,
                                      const Cluster& cluster) {
  const double slow = compute_slowdown(profile, cluster);
  std::vector<std::size_t> bytes;
  for (const auto& p : profile.parameters) bytes.push_back(static_cast<std::size_t>(p.bytes));
  const auto plan = train::plan_buckets(bytes, static_cast<std::size_t>(options.first_bucket_bytes),
                                        static_cast<std::size_t>(options.bucket_bytes));

  // Each bucket's bytes, ready time, algorithm and rounds: the same at every step.
  const double backward_start = (profile.data_s + profile.forward_s) * slow;
  const double backward_end = backward_start + profile.backward_s * slow;
  const double after = (profile.optimizer_s + profile.other_s) * slow;
  StepPrediction out;
  out.batches = cluster.world();
  std::vector<std::vector<Round>> rounds;
  Traffic traffic;
  for (const auto& bucket : plan.buckets) {
    BucketReplay b;
    b.bytes = options.flag_bytes;
    double ready = 0;
    for (auto i : bucket) {
      b.bytes += profile.parameters[i].bytes;
      ready = std::max(ready, profile.parameters[i].ready_s);
    }
    b.ready_s = options.overlap ? backward_start + ready * slow : backward_end;
    b.algorithm = options.algorithm != comm::Algorithm::automatic
                      ? options.algorithm
                      : comm::auto_allreduce_algorithm(options.engine, cluster.world(),
                                                       static_cast<std::size_t>(b.bytes),
                                                       cluster.hosts, cluster.ranks_per_host);
    rounds.push_back(allreduce_rounds(b.algorithm, options.engine, b.bytes, cluster));
    for (const auto& round : rounds.back()) traffic.add(round, cluster);
    out.buckets.push_back(b);
  }
  // The steps one after another, from links at rest, until a step leaves the links as it found
  // them: with a burst, each step's links hold what the previous left them (Links); without,
  // the first step is every step.
  Links links(cluster);
  double step_start = 0, links_busy_until = 0;
  for (int step = 0; step < kMaxSteps; ++step) {
    const auto tokens_at_start = links.tokens();
    double free_at = 0;  // the communication thread, from the step's start
    out.comm_s = 0;
    for (std::size_t k = 0; k < out.buckets.size(); ++k) {
      auto& b = out.buckets[k];
      b.start_s = std::max(b.ready_s, free_at);
      links.idle(step_start + b.start_s - links_busy_until);
      b.end_s = b.start_s + links.send(rounds[k]);
      free_at = b.end_s;
      links_busy_until = step_start + b.end_s;
      out.comm_s += b.end_s - b.start_s;
    }
    const double synced = std::max(backward_end, free_at);
    out.exposed_comm_s = synced - backward_end;
    out.step_s = synced + after;
    if (cluster.burst_bytes <= 0 || out.buckets.empty()) break;
    // The links when the next step's first bucket starts, against this step's.
    const double next_first = step_start + out.step_s + out.buckets.front().start_s;
    links.idle(next_first - links_busy_until);
    links_busy_until = next_first;
    if (links.same_tokens(tokens_at_start)) break;
    step_start += out.step_s;
  }
  out.compute_s = profile.compute_s() * slow;
  std::tie(out.busiest_host, out.bytes_per_link) = traffic.busiest();
  return out;
}

}  // namespace distml::sim
