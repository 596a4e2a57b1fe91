#include "distml/sim/pipeline.h"

#include "distml/core/error.h"
#include "distml/train/pipeline/partition.h"
#include "distml/train/pipeline/simulate.h"

namespace distml::sim {
namespace {

// 1. The layer counts of the stages, as the run decides them.
std::vector<int> stage_counts(const std::vector<train::pipeline::LayerCost>& costs,
                              const PipelineOptions& o) {
  if (!o.partition.empty())
    return train::pipeline::checked_partition(o.partition, o.stages,
                                              static_cast<int>(costs.size()));
  std::vector<double> weights;
  for (const auto& c : costs)
    weights.push_back(o.partition_by_profile ? c.forward_s + c.backward_s : c.parameter_bytes);
  return train::pipeline::balanced_partition(weights, o.stages);
}

}  // namespace

void check_replayable(const Profile& profile, const PipelineOptions& o) {
  if (profile.layers.empty())
    throw ConfigError(cat("the profile of model \"", profile.model,
                          "\" has no layers (it is not a sequence of layers): its pipeline "
                          "cannot be replayed"));
  if (o.schedule != "gpipe" && o.schedule != "1f1b")
    throw ConfigError(
        cat("parallel.schedule = \"", o.schedule, "\" is not simulated yet; gpipe and 1f1b are"));
}

StepPrediction predict_pipeline_step(const Profile& profile, const PipelineOptions& o,
                                     const Cluster& cluster) {
  check_replayable(profile, o);
  if (cluster.world() % o.stages != 0)
    throw ConfigError(
        cat(cluster.world(), " ranks do not make pipelines of ", o.stages, " stages"));
  const std::int64_t micro = (profile.batch_size + o.micro_batches - 1) / o.micro_batches;
  const auto costs = profile.layers_at(micro);  // 2.
  const auto counts = stage_counts(costs, o);
  const int replicas = cluster.world() / o.stages;

  // 3. A pipeline within a host when the hosts' ranks hold whole pipelines.
  const bool within_host = cluster.ranks_per_host % o.stages == 0;
  const LinkCost& stage_link = within_host ? cluster.within_host : cluster.network;
  // A tensor travels as its header and its data, received one after the other.
  const train::pipeline::Link link{stage_link.latency_s + 2 * cluster.p2p_overhead_s,
                                   stage_link.bytes_per_s};
  const train::pipeline::Link across{cluster.network.latency_s, cluster.network.bytes_per_s};
  // 4.
  const double cores = cluster.shared_cores > 0 ? cluster.shared_cores * o.stages / cluster.world()
                                                : static_cast<double>(profile.threads) * o.stages;
  const train::pipeline::Cores pipeline_cores{.available = cores, .threads = profile.threads};

  StepPrediction out;
  out.batches = replicas;
  const double slow = compute_slowdown(profile, cluster);
  train::pipeline::Unequal unequal;  // 6.
  if (o.slow_rank >= 0 && o.slow_rank < cluster.world()) {
    unequal.slowdown.assign(o.stages, 1.0);
    unequal.slowdown[o.slow_rank % o.stages] = o.slow_factor;
  }
  const double pipeline_s = train::pipeline::simulated_step_s(
      costs, counts, o.micro_batches, o.schedule, link, pipeline_cores, 1, o.recompute, unequal);
  out.comm_s = out.exposed_comm_s =
      replicas > 1 ? train::pipeline::slowest_allreduce_s(costs, counts, across, replicas) : 0;
  const double around = (profile.data_s + profile.other_s) * slow;  // 5.
  out.step_s = around + pipeline_s + out.comm_s;
  out.compute_s = around + pipeline_s;
  // The busiest NIC: a stage's activations and gradients per micro-batch across hosts, or
  // its share of the replicas' ring.
  const auto bounds = train::pipeline::stage_bounds(counts);
  double crossing = 0;
  if (!within_host) {
    for (int s = 0; s + 1 < o.stages; ++s)
      crossing = std::max(crossing, costs[bounds[s + 1] - 1].output_bytes * o.micro_batches);
  }
  double ring = 0;
  if (replicas > 1) {
    for (int s = 0; s < o.stages; ++s) {
      double bytes = 0;
      for (int l = bounds[s]; l < bounds[s + 1]; ++l) bytes += costs[l].parameter_bytes;
      ring = std::max(ring, 2.0 * (replicas - 1) / replicas * bytes);
    }
  }
  out.bytes_per_link = crossing + ring;
  return out;
}

}  // namespace distml::sim
