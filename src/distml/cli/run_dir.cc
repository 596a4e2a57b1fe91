#include "run_dir.h"

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "distml/core/atomic_file.h"
#include "distml/core/error.h"

namespace distml::cli {

namespace fs = std::filesystem;

RunDir::RunDir(std::string dir, bool resuming) : dir_(std::move(dir)), resuming_(resuming) {
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (!fs::is_directory(dir_))
    throw UsageError(cat("--run-dir ", dir_, ": cannot create the folder",
                         ec ? ": " + ec.message() : std::string()));
  if (resuming_) return;
  // A second run would mix its lines with the first one's, and a report would plot both.
  if (fs::exists(path(kRunDoneFile), ec))
    throw UsageError(cat("--run-dir ", dir_, " holds a finished run (", kRunDoneFile,
                         "): choose another folder, or remove that one"));
  if (fs::exists(path(kRunMetricsFile), ec))
    throw UsageError(cat("--run-dir ", dir_, " holds a run that stopped before its done line (",
                         kRunMetricsFile, " without ", kRunDoneFile,
                         "): continue it with --resume, choose another folder, or remove it"));
}

std::string RunDir::path(const char* file) const { return (fs::path(dir_) / file).string(); }

std::string RunDir::timeline_path() const { return path(kRunTimelineFile); }

void RunDir::begin(const std::string& config_toml) {
  write_file_atomically(path(kRunConfigFile), {config_toml});
  const std::string metrics = path(kRunMetricsFile);
  metrics_.reset(std::fopen(metrics.c_str(), resuming_ ? "a" : "w"));
  if (!metrics_)
    throw UsageError(cat("--run-dir: cannot write ", metrics, ": ", std::strerror(errno)));
}

void RunDir::record(const nlohmann::json& event) {
  if (!metrics_) return;  // not rank 0
  const std::string line = event.dump() + "\n";
  if (std::fwrite(line.data(), 1, line.size(), metrics_.get()) != line.size() ||
      std::fflush(metrics_.get()) != 0)
    throw Error(cat("cannot write ", path(kRunMetricsFile), ": ", std::strerror(errno)));
}

void RunDir::finish(const nlohmann::json& done) {
  record(done);
  write_file_atomically(path(kRunDoneFile), {done.dump(2), "\n"});
}

void add_run_dir_option(CLI::App& command, std::string& dir, bool resumes) {
  command.add_option("--run-dir", dir,
                     cat("Write config.toml, metrics.jsonl (every event, as --json prints it), "
                         "done.json and the timeline into this folder (created if missing), for "
                         "`distml report`; a folder holding a run is refused",
                         resumes ? " unless resuming" : ""));
}

std::string timeline_destination(const RunDir* run_dir, bool timeline_given,
                                 const std::string& timeline_file) {
  if (!timeline_given) return "";
  if (!run_dir && timeline_file.empty())
    throw UsageError("--timeline needs a FILE, or --run-dir DIR to write DIR/timeline.json");
  if (run_dir && !timeline_file.empty())
    throw UsageError(cat("--timeline ", timeline_file, ": with --run-dir the timeline goes into ",
                         run_dir->timeline_path(), "; give --timeline without a file"));
  return run_dir ? run_dir->timeline_path() : timeline_file;
}

}  // namespace distml::cli
