// Where each rank's time went, from a Chrome-trace timeline (--timeline): the seconds per event
// name per rank, for the report's stacked bars.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace distml::cli {

struct RankSeconds {
  int rank = 0;
  std::string rank_name;  // the trace's process name ("rank 0"), else "rank <pid>"
  std::string name;       // the event's name
  double seconds = 0;
};

/// `trace` is {"traceEvents": [...]} with complete events ("ph": "X", ts and dur in
/// microseconds, pid = rank, tid = thread) and "M" process_name metadata. Counts each event's
/// self time: its duration less that of the events nested in it on the same thread, so that a
/// rank's bar adds up to the time its threads spent inside some event, never twice. Sorted by
/// rank, then name. DataError naming `source` for a trace of another shape.
std::vector<RankSeconds> rank_breakdown(const nlohmann::json& trace, const std::string& source);

}  // namespace distml::cli
