// The report's one self-contained HTML page: the runs, the comparison table of their done
// lines, and the plots, with vega and vega-lite inlined so that it opens without a network.
#pragma once

#include <string>
#include <vector>

#include "report_charts.h"
#include "run_record.h"

namespace distml::cli {

/// The minified vega and vega-lite bundles the page inlines.
struct PlotScripts {
  std::string vega, vega_lite;
};

/// Reads the bundles from $DISTML_VEGA_DIR, else from the node_modules folder that
/// scripts/setup.sh installs them into (its path compiled in); UsageError naming where it
/// looked and how to install them when they are missing.
PlotScripts load_plot_scripts();

/// The whole page.
std::string report_page(const std::vector<RunRecord>& runs, const std::vector<Chart>& charts,
                        const PlotScripts& scripts);

/// The comparison table: one column per run, one row per key of the done lines (and a few
/// derived from the metrics first). Each number's cell holds its exact value in data-value.
std::string comparison_table(const std::vector<RunRecord>& runs);

/// `text` with &, <, >, " and ' escaped for HTML.
std::string html_escape(const std::string& text);

}  // namespace distml::cli
