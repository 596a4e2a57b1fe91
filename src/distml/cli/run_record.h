// One run directory (run_dir.h) as `distml report` reads it: the events of metrics.jsonl with
// a resumed run's repeats resolved, the done line, the config, and the timeline's time per rank.
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "timeline_breakdown.h"

namespace distml::cli {

/// The JSON document in `path`; DataError naming the file when it cannot be read or parsed.
nlohmann::json parse_json_file(const std::filesystem::path& path);

struct RunRecord {
  std::string dir;
  std::string name;  // what the page calls the run: the folder's name, made unique
  /// metrics.jsonl less the done line, each with "time_s": its "elapsed_s" on a clock that a
  /// resume or restart does not set back.
  std::vector<nlohmann::json> events;
  nlohmann::json done;                // done.json; null when the run stopped before its done line
  double done_time_s = 0;             // the done line's wall_s on the events' clock
  std::string config;                 // config.toml; empty when absent
  std::vector<RankSeconds> timeline;  // empty without timeline.json
};

/// Reads `dir`: UsageError when it is not a folder, DataError naming the file (and line) that
/// is missing or broken. A last line of metrics.jsonl cut short by a crash (no newline, not
/// JSON) is left out with a warning on stderr.
RunRecord read_run_dir(const std::string& dir);

/// Names each run by its folder's name; the second of two equal names gets " (2)", and so on.
void name_runs(std::vector<RunRecord>& runs);

/// A resumed or restarted run appends to metrics.jsonl: from the step it went back to, the new
/// attempt's events replace the earlier ones, and its clock, which starts again at 0, continues
/// the one before. Returns the events with "time_s" set; `clock_offset` receives what the last
/// attempt's times were shifted by. Exposed for its test.
std::vector<nlohmann::json> resolve_restarts(const std::vector<nlohmann::json>& lines,
                                             double& clock_offset);

}  // namespace distml::cli
