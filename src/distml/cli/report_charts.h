// The report's plots as Vega-Lite specs (rendered in the page by vega and vega-lite): loss,
// accuracy or return against steps and wall time, throughput, communication, bytes per step,
// and the time per rank of each timeline. Several runs share each plot, one colour per run.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "run_record.h"

namespace distml::cli {

struct Chart {
  std::string section;  // the page's heading it goes under
  std::string title;
  nlohmann::json spec;  // Vega-Lite
};

/// The plots that `runs` have data for, in page order; a plot no run has data for is left out.
std::vector<Chart> report_charts(const std::vector<RunRecord>& runs);

}  // namespace distml::cli
