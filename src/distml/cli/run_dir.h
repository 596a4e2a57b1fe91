// The run directory of `--run-dir DIR` (train, rl, fit): the config as resolved, every event
// rank 0 reports, the done line, and the timeline when one is asked for; `distml report` reads
// it. The layout is in docs/operations.md ("Run directory and report").
#pragma once

#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

namespace CLI {
class App;
}

namespace distml::cli {

/// The files of a run directory.
inline constexpr const char* kRunConfigFile = "config.toml";
inline constexpr const char* kRunMetricsFile = "metrics.jsonl";
inline constexpr const char* kRunDoneFile = "done.json";
inline constexpr const char* kRunTimelineFile = "timeline.json";

class RunDir {
 public:
  /// Checks `dir` for a new run and creates it if missing. A folder that holds a run already
  /// (done.json, or the metrics.jsonl of one that stopped) is a UsageError unless `resuming`:
  /// a resumed run appends to its metrics. Opens no file, so that every process of a job can
  /// check before rank 0 writes (rank 0 writes only after collectives with the others).
  RunDir(std::string dir, bool resuming);

  /// Rank 0, before its first event: writes config.toml (atomically) and opens metrics.jsonl,
  /// appending when resuming.
  void begin(const std::string& config_toml);
  /// `event` as one line of metrics.jsonl, flushed, so that a run that crashes keeps its lines.
  void record(const nlohmann::json& event);
  /// The done line: the last line of metrics.jsonl, and done.json (atomically).
  void finish(const nlohmann::json& done);

  /// DIR/timeline.json: where the timeline goes with --run-dir.
  std::string timeline_path() const;
  const std::string& dir() const { return dir_; }

 private:
  std::string path(const char* file) const;

  std::string dir_;
  bool resuming_;
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> metrics_{nullptr, &std::fclose};
};

/// Adds --run-dir to a subcommand, filling `dir`; `resumes`: the subcommand can resume a run.
void add_run_dir_option(CLI::App& command, std::string& dir, bool resumes = true);

/// Where --timeline writes: its FILE; with a run directory, DIR/timeline.json (--timeline
/// given without a FILE); empty for no timeline. UsageError for --timeline without a FILE and
/// without --run-dir, or with both.
std::string timeline_destination(const RunDir* run_dir, bool timeline_given,
                                 const std::string& timeline_file);

}  // namespace distml::cli
