// The report's scaling plot: what `distml simulate --json` predicted for each cluster size,
// one line per prediction file, with the runs' measured steps as points on the same axes.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "report_charts.h"
#include "run_record.h"

namespace distml::cli {

/// One `distml simulate --json` output: its label (the done line's) and its prediction lines.
struct Predictions {
  std::string label;
  std::vector<nlohmann::json> rows;  // each: ranks, step_s, efficiency
};

/// DataError naming the file and line that is not a simulate line or lacks a key.
Predictions read_predictions(const std::string& path);

/// Step time and efficiency against ranks: a line per prediction file; each run whose done
/// line has its ranks (np) and steps per second, a point at its measured step. Nothing
/// without predictions.
void add_scaling(std::vector<Chart>& charts, const std::vector<RunRecord>& runs,
                 const std::vector<Predictions>& predicted);

}  // namespace distml::cli
