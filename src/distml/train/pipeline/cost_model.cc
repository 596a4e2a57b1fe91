#include "distml/train/pipeline/cost_model.h"

#include <algorithm>
#include <limits>
#include <set>

#include "distml/core/error.h"
#include "distml/train/pipeline/partition.h"

namespace distml::train::pipeline {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

double link_s(const LayerCost& last_of_stage, const Link& link) {
  return 2 * (link.latency_s + last_of_stage.output_bytes / link.bytes_per_s);
}

// Step 4: a ring all-reduce of `bytes` over `replicas`.
double allreduce_s(double bytes, int replicas, const Link& link) {
  if (replicas < 2) return 0;
  return 2.0 * (replicas - 1) * (link.latency_s + bytes / replicas / link.bytes_per_s);
}

// Prefix sums of compute and parameter bytes, so that a stage's totals cost O(1).
struct Prefix {
  std::vector<double> compute = {0}, parameters = {0};
  explicit Prefix(const std::vector<LayerCost>& layers) {
    for (const auto& l : layers) {
      compute.push_back(compute.back() + l.forward_s + l.backward_s);
      parameters.push_back(parameters.back() + l.parameter_bytes);
    }
  }
};

}  // namespace

double predicted_step_s(const std::vector<LayerCost>& layers, const std::vector<int>& counts,
                        int micro_batches, const Link& link, int replicas) {
  const Prefix prefix(layers);
  const auto bounds = stage_bounds(counts);
  double sum = 0, bottleneck = 0;
  for (std::size_t s = 0; s < counts.size(); ++s) {
    const double compute = prefix.compute[bounds[s + 1]] - prefix.compute[bounds[s]];
    sum += compute;
    bottleneck = std::max(bottleneck, compute);
    if (s + 1 < counts.size()) {
      const double k = link_s(layers[bounds[s + 1] - 1], link);
      sum += k;
      bottleneck = std::max(bottleneck, k);
    }
  }
  return sum + (micro_batches - 1) * bottleneck +
         slowest_allreduce_s(layers, counts, link, replicas);
}

double slowest_allreduce_s(const std::vector<LayerCost>& layers, const std::vector<int>& counts,
                           const Link& link, int replicas) {
  const Prefix prefix(layers);
  const auto bounds = stage_bounds(counts);
  double slowest = 0;
  for (std::size_t s = 0; s < counts.size(); ++s)
    slowest = std::max(slowest,
                       allreduce_s(prefix.parameters[bounds[s + 1]] - prefix.parameters[bounds[s]],
                                   replicas, link));
  return slowest;
}

Partition best_partition(const std::vector<LayerCost>& layers, int stages, int micro_batches,
                         const Link& link, int replicas) {
  const int n = static_cast<int>(layers.size());
  if (stages < 1 || n < stages)
    throw ConfigError(
        cat(stages, " pipeline stages need at least as many layers; the model has ", n));
  const Prefix prefix(layers);
  auto compute = [&](int i, int j) { return prefix.compute[j] - prefix.compute[i]; };
  // Every stage's and link's cost that could be the bottleneck.
  std::set<double> candidates;
  for (int i = 0; i < n; ++i) {
    candidates.insert(link_s(layers[i], link));
    for (int j = i + 1; j <= n; ++j) candidates.insert(compute(i, j));
  }
  Partition best{{}, kInf};
  for (const double bound : candidates) {
    // least[s][j]: the least sum of link costs that cuts the first j layers into s stages
    // with no stage or link above `bound`; cut[s][j]: where the last of them starts.
    std::vector<std::vector<double>> least(stages + 1, std::vector<double>(n + 1, kInf));
    std::vector<std::vector<int>> cut(stages + 1, std::vector<int>(n + 1, 0));
    least[0][0] = 0;
    for (int s = 1; s <= stages; ++s)
      for (int j = s; j <= n; ++j)
        for (int i = s - 1; i < j; ++i) {
          if (least[s - 1][i] == kInf || compute(i, j) > bound) continue;
          double k = 0;
          if (s > 1) {  // the link into this stage
            k = link_s(layers[i - 1], link);
            if (k > bound) continue;
          }
          if (least[s - 1][i] + k < least[s][j]) {
            least[s][j] = least[s - 1][i] + k;
            cut[s][j] = i;
          }
        }
    if (least[stages][n] == kInf) continue;
    std::vector<int> counts(stages);
    for (int s = stages, j = n; s >= 1; --s) {
      counts[s - 1] = j - cut[s][j];
      j = cut[s][j];
    }
    const double step = predicted_step_s(layers, counts, micro_batches, link, replicas);
    if (step < best.step_s) best = {counts, step};
  }
  return best;
}

}  // namespace distml::train::pipeline
