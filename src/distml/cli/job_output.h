// What a job's processes write to standard error, tidied for the terminal by distml launch
// (issue: an error found by the ranks drowned under one copy per rank and mpirun's report):
//  - a rank's error line ("distml: error: ...", cli/main.cc) is held back, so that the
//    launcher prints it once, as the job's last line (JobOutput::errors());
//  - mpirun's report, the blocks between lines of dashes, and Slurm's (srun's and slurmstepd's
//    lines) go to the job's log file instead;
//  - a launcher's tag before a line (srun --label, mpirun --tag-output) is looked past;
//  - everything else passes through as it comes, a progress bar's unfinished line included.
#pragma once

#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

namespace distml::cli {

/// The launcher's log of what it keeps off the terminal (mpirun's reports, its own notes about
/// stopping processes), opened at the first line: ${TMPDIR:-/tmp}/distml-launch-PID.log.
class LaunchLog {
 public:
  static LaunchLog& get();
  void write(std::string_view text);
  /// The file's path, or empty while nothing was written.
  const std::string& path() const { return path_; }

 private:
  std::FILE* file_ = nullptr;
  std::string path_;
};

/// One process's standard error, tidied. The error lines it holds back go to `errors` (without
/// their newline), where those of a job's processes meet in the order they came.
class StderrFilter {
 public:
  explicit StderrFilter(std::vector<std::string>& errors) : errors_(&errors) {}
  /// Takes the next bytes; returns what goes to the terminal now.
  std::string take(std::string_view bytes);
  /// At the end of the stream: the rest.
  std::string finish();

 private:
  std::string line(std::string_view text);  // a whole line: what goes to the terminal
  std::string pending_;                     // the start of a line that may be held back
  bool in_report_ = false;                  // between mpirun's lines of dashes
  std::vector<std::string>* errors_;
};

/// The lines of `errors` (each "distml: error: [rank R: ]MESSAGE"), each message once, in
/// order: the same error found by every rank is said once, naming the first rank.
std::vector<std::string> distinct_errors(const std::vector<std::string>& errors);

}  // namespace distml::cli
