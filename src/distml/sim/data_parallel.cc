#include "distml/sim/data_parallel.h"

#include <algorithm>
#include <cmath>
#include <tuple>

#include "distml/comm/auto_policy.h"
#include "distml/core/error.h"
#include "distml/sim/collectives.h"

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

train::BucketPlan profile_buckets(const Profile& profile, const AllreduceOptions& options) {
  std::vector<std::size_t> bytes;
  for (const auto& p : profile.parameters) bytes.push_back(static_cast<std::size_t>(p.bytes));
  return train::plan_buckets(bytes, static_cast<std::size_t>(options.first_bucket_bytes),
                             static_cast<std::size_t>(options.bucket_bytes));
}

StepPrediction predict_allreduce_step(const Profile& profile, const AllreduceOptions& options,
                                      const Cluster& cluster) {
  const double slow = compute_slowdown(profile, cluster);
  const auto plan = profile_buckets(profile, options);

  // Each bucket's bytes, ready time, algorithm and rounds: the same at every step.
  const double backward_start = (profile.data_s + profile.forward_s) * slow;
  const double backward_end = backward_start + profile.backward_s * slow;
  const int world = cluster.world();
  const bool zero = options.zero_stage > 0;
  // ZeRO's optimizer updates its 1/N, before the all-gather; the bookkeeping follows.
  const double optimizer_s = profile.optimizer_s * slow / (zero ? world : 1);
  const double other_s = profile.other_s * slow;
  std::vector<Round> gather;  // ZeRO's all-gathers of the updated blocks, every bucket's
  StepPrediction out;
  out.batches = cluster.world();
  std::vector<std::vector<Round>> rounds;
  std::vector<double> arithmetic;  // before each bucket's rounds: a compressor's
  Traffic traffic;
  const bool compressing = !options.compressed.empty();
  DML_CHECK(!compressing || options.compressed.size() == plan.buckets.size(),
            "simulated compression: ", options.compressed.size(), " buckets for ",
            plan.buckets.size());
  auto add = [&](BucketReplay b, std::vector<Round> bucket_rounds, double before_s) {
    for (const auto& round : bucket_rounds) traffic.add(round, cluster);
    rounds.push_back(std::move(bucket_rounds));
    arithmetic.push_back(before_s);
    out.buckets.push_back(b);
  };
  // An all-reduce of `bytes` by the configured algorithm, or the run's automatic choice.
  auto algorithm_for = [&](double bytes, comm::Algorithm configured) {
    return configured != comm::Algorithm::automatic
               ? configured
               : comm::auto_allreduce_algorithm(options.engine, cluster.world(),
                                                static_cast<std::size_t>(bytes), cluster.hosts,
                                                cluster.ranks_per_host);
  };
  for (std::size_t k = 0; k < plan.buckets.size(); ++k) {
    BucketReplay b;
    double ready = 0;
    for (auto i : plan.buckets[k]) {
      b.bytes += profile.parameters[i].bytes;
      ready = std::max(ready, profile.parameters[i].ready_s);
    }
    if (!compressing) {
      b.bytes += options.flag_bytes;
      b.ready_s = options.overlap ? backward_start + ready * slow : backward_end;
      if (zero) {  // N equal blocks, the last padded
        const double block =
            std::ceil(b.bytes / options.element_bytes / world) * options.element_bytes;
        b.bytes = block * world;
        const auto g = allgather_rounds(block, cluster);
        gather.insert(gather.end(), g.begin(), g.end());
      }
      if (options.zero_stage == 2) {
        b.algorithm = comm::Algorithm::ring;
        add(b, reduce_scatter_rounds(b.bytes, cluster), 0);
        continue;
      }
      b.algorithm = algorithm_for(b.bytes, options.algorithm);
      add(b, allreduce_rounds(b.algorithm, options.engine, b.bytes, cluster), 0);
      continue;
    }
    // The compressor's collectives take the communicator's automatic algorithm.
    const auto& c = options.compressed[k];
    std::vector<Round> wire;
    bool gathered = false;
    b.bytes = 0;
    for (const auto& collective : c.collectives) {
      gathered = gathered || collective.gathered;
      b.bytes += collective.bytes;
      b.algorithm = collective.gathered
                        ? comm::Algorithm::ring
                        : algorithm_for(collective.bytes, comm::Algorithm::automatic);
      const auto r = collective.gathered
                         ? allgather_rounds(collective.bytes, cluster)
                         : allreduce_rounds(b.algorithm, options.engine, collective.bytes, cluster);
      wire.insert(wire.end(), r.begin(), r.end());
    }
    b.ready_s = backward_end;
    const double decodes = gathered ? cluster.world() - 1 : 0;
    add(b, std::move(wire), (c.reduce_s + decodes * c.decode_s) * slow);
  }
  if (compressing && options.flag_bytes > 0) {  // the flags, a float32 per bucket
    BucketReplay flags;
    flags.bytes = 4.0 * static_cast<double>(plan.buckets.size());
    flags.ready_s = backward_end;
    flags.algorithm = algorithm_for(flags.bytes, comm::Algorithm::automatic);
    add(flags, allreduce_rounds(flags.algorithm, options.engine, flags.bytes, cluster), 0);
  }
  // The steps one after another, from links at rest, until a step leaves the links as it found
  // them: with a burst, each step's links hold what the previous left them (Links); without,
  // the first step is every step.
  Links links(cluster);
  double step_start = 0, links_busy_until = 0;
  for (int step = 0; step < kMaxReplayedSteps; ++step) {
    const auto tokens_at_start = links.tokens();
    double free_at = 0;  // the communication thread, from the step's start
    out.comm_s = 0;
    for (std::size_t k = 0; k < out.buckets.size(); ++k) {
      auto& b = out.buckets[k];
      b.start_s = std::max(b.ready_s, free_at);
      const double sending_s = b.start_s + arithmetic[k];
      links.idle(step_start + sending_s - links_busy_until);
      b.end_s = sending_s + links.send(rounds[k]);
      free_at = b.end_s;
      links_busy_until = step_start + b.end_s;
      out.comm_s += b.end_s - b.start_s;
    }
    const double synced = std::max(backward_end, free_at);
    out.exposed_comm_s = synced - backward_end;
    double updated = synced + optimizer_s;
    if (!gather.empty()) {  // ZeRO: the parameters all-gathered, blocking
      links.idle(step_start + updated - links_busy_until);
      const double gather_s = links.send(gather);
      links_busy_until = step_start + updated + gather_s;
      updated += gather_s;
      out.comm_s += gather_s;
      out.exposed_comm_s += gather_s;
    }
    out.step_s = updated + other_s;
    if (cluster.burst_bytes <= 0 || out.buckets.empty()) break;
    // The links when the next step's first bucket starts, against this step's.
    const double next_first = step_start + out.step_s + out.buckets.front().start_s;
    links.idle(next_first - links_busy_until);
    links_busy_until = next_first;
    if (links.same_tokens(tokens_at_start)) break;
    step_start += out.step_s;
  }
  out.compute_s = profile.compute_s() * slow - profile.optimizer_s * slow + optimizer_s;
  for (const auto& round : gather) traffic.add(round, cluster);
  std::tie(out.busiest_host, out.bytes_per_link) = traffic.busiest();
  return out;
}

}  // namespace distml::sim
