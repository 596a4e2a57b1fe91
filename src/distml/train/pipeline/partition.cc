#include "distml/train/pipeline/partition.h"

#include <algorithm>
#include <limits>
#include <numeric>

#include "distml/core/error.h"

namespace distml::train::pipeline {

std::vector<int> balanced_partition(const std::vector<double>& layer_costs, int stages) {
  const int n = static_cast<int>(layer_costs.size());
  if (stages < 1 || n < stages)
    throw ConfigError(cat("parallel.pipeline_stages = ", stages, " needs at least as many layers; ",
                          "the model has ", n));
  std::vector<double> prefix(n + 1, 0);
  for (int i = 0; i < n; ++i) prefix[i + 1] = prefix[i] + layer_costs[i];
  constexpr double kInf = std::numeric_limits<double>::infinity();
  // best[s][j]: the smallest largest-stage cost of the first j layers in s stages; cut[s][j]:
  // where the last of those s stages starts.
  std::vector<std::vector<double>> best(stages + 1, std::vector<double>(n + 1, kInf));
  std::vector<std::vector<int>> cut(stages + 1, std::vector<int>(n + 1, 0));
  best[0][0] = 0;
  for (int s = 1; s <= stages; ++s)
    for (int j = s; j <= n; ++j)
      for (int i = s - 1; i < j; ++i) {
        const double cost = std::max(best[s - 1][i], prefix[j] - prefix[i]);
        if (cost < best[s][j]) {
          best[s][j] = cost;
          cut[s][j] = i;
        }
      }
  std::vector<int> counts(stages);
  for (int s = stages, j = n; s >= 1; --s) {
    counts[s - 1] = j - cut[s][j];
    j = cut[s][j];
  }
  return counts;
}

std::vector<int> checked_partition(const std::vector<std::int64_t>& counts, int stages,
                                   int layers) {
  if (static_cast<int>(counts.size()) != stages)
    throw ConfigError(cat("parallel.partition lists ", counts.size(), " layer counts for ", stages,
                          " stages (parallel.pipeline_stages)"));
  std::vector<int> out;
  for (auto c : counts) {
    if (c < 1)
      throw ConfigError(cat("parallel.partition: every stage needs at least one layer, got ", c));
    out.push_back(static_cast<int>(c));
  }
  const int total = std::accumulate(out.begin(), out.end(), 0);
  if (total != layers)
    throw ConfigError(cat("parallel.partition's layer counts sum to ", total, " but the model has ",
                          layers, " layers"));
  return out;
}

std::vector<int> stage_bounds(const std::vector<int>& counts) {
  std::vector<int> bounds = {0};
  for (int c : counts) bounds.push_back(bounds.back() + c);
  return bounds;
}

}  // namespace distml::train::pipeline
