// Where to cut a sequence of layers into pipeline stages.
#pragma once

#include <cstdint>
#include <vector>

namespace distml::train::pipeline {

/// Layer counts per stage (contiguous, each at least one layer, summing to the number of
/// layers) that minimise the largest stage's total cost; ties go to the earliest cuts. Exact
/// (dynamic programming over cut points, O(stages x layers^2)). ConfigError when there are
/// fewer layers than stages.
std::vector<int> balanced_partition(const std::vector<double>& layer_costs, int stages);

/// The user's layer counts (parallel.partition = [..]), checked: one per stage, each at least
/// one, summing to `layers`. ConfigError naming the key otherwise.
std::vector<int> checked_partition(const std::vector<std::int64_t>& counts, int stages, int layers);

/// The first layer of each stage, and one past the last layer: {0, c0, c0 + c1, ..., layers}.
std::vector<int> stage_bounds(const std::vector<int>& counts);

}  // namespace distml::train::pipeline
