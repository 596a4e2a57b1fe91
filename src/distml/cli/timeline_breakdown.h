// Where each rank's time went, from a Chrome-trace timeline (--timeline): the seconds per event
// name per rank and lane (thread), for the report's stacked bars: a bar per lane, since lanes
// overlap in time (the all-reduce's lane runs beside backward), and one stack of them all would
// show more time than the run took.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace distml::cli {

struct RankSeconds {
  int rank = 0;
  std::string rank_name;  // the trace's process name ("rank 0"), else "rank <pid>"
  std::string lane;       // the thread's name ("main", "comm"), else "thread <tid>"
  std::string name;       // the event's name
  double seconds = 0;
};

/// `trace` is {"traceEvents": [...]} with complete events ("ph": "X", ts and dur in
/// microseconds, pid = rank, tid = thread) and "M" process_name and thread_name metadata.
/// Counts each event's self time: its duration less that of the events nested in it on the same
/// thread, so that a lane's bar adds up to the time its thread spent inside some event, never
/// twice. Sorted by rank, lane, then name. DataError naming `source` for a trace of another shape.
std::vector<RankSeconds> rank_breakdown(const nlohmann::json& trace, const std::string& source);

}  // namespace distml::cli
