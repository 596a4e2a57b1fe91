// One row of a collective benchmark and how it is printed: a table for people, JSON lines
// for programs. Bandwidths follow nccl-tests (algbw = bytes / time; busbw scales algbw by
// the fraction of data each link must carry, so that it is comparable across world sizes).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace distml::cli {

struct BenchRow {
  std::string op, engine, algo;
  std::size_t bytes = 0;
  int np = 1;
  double time_us = 0;                      // median over repetitions
  std::optional<double> baseline_time_us;  // raw MPI on the same buffers
};

/// busbw / algbw for `op` at world size `np` (nccl-tests' factors).
double bus_factor(const std::string& op, int np);

nlohmann::json to_json(const BenchRow& row);
/// A fixed-width table with a header.
std::string format_table(const std::vector<BenchRow>& rows);

}  // namespace distml::cli
