#include "job_output.h"

#include <unistd.h>

#include <cstdlib>
#include <set>

#include "distml/core/error.h"

namespace distml::cli {
namespace {

constexpr std::string_view kErrorPrefix = "distml: error: ";

// A line's text without the tag a launcher put before it: srun --label's "0: " (padded as
// " 0: " for ten tasks and more), mpirun --tag-output's "[1,0]<stderr>:".
std::string_view untagged(std::string_view line) {
  const auto start = line.find_first_not_of(' ');
  const auto end = line.find_first_not_of("0123456789", start);
  if (start != std::string_view::npos && end != std::string_view::npos && end > start &&
      line.substr(end, 2) == ": ")
    return line.substr(end + 2);
  if (line.starts_with('[')) {
    if (const auto tag_end = line.find(">:");
        tag_end != std::string_view::npos &&
        line.substr(0, tag_end).find(']') != std::string_view::npos)
      return line.substr(tag_end + 2);
  }
  return line;
}

// Slurm's own account of a step (srun's notes and errors, slurmstepd's cancellation, which
// Slurm 22.05 signs "slurmstepd-HOST: ").
bool is_slurm_report(std::string_view line) {
  return line.starts_with("srun: ") || line.starts_with("slurmstepd: ") ||
         line.starts_with("slurmstepd-");
}

bool is_dashes(std::string_view line) {
  return line.size() >= 20 && line.find_first_not_of('-') == std::string_view::npos;
}

// Whether `start` could still become a line that is held back (an error, a line of dashes,
// Slurm's report), tagged or not.
bool may_be_held(std::string_view start) {
  const std::string_view text = untagged(start);
  const auto prefix_of = [&](std::string_view whole) {
    const std::size_t n = std::min(text.size(), whole.size());
    return whole.substr(0, n) == text.substr(0, n);
  };
  // The start of srun's tag ("1", " 1:") may still become one.
  const auto untagged_from = start.find_first_not_of(" 0123456789");
  const bool tag_so_far = untagged_from == std::string_view::npos ||
                          (untagged_from > 0 && start.substr(untagged_from) == ":");
  return prefix_of(kErrorPrefix) || prefix_of("srun: ") || prefix_of("slurmstepd") ||
         start.find_first_not_of('-') == std::string_view::npos || tag_so_far;
}

}  // namespace

LaunchLog& LaunchLog::get() {
  static LaunchLog log;
  return log;
}

void LaunchLog::write(std::string_view text) {
  if (!file_) {
    const char* tmp = std::getenv("TMPDIR");
    path_ = cat(tmp && *tmp ? tmp : "/tmp", "/distml-launch-", ::getpid(), ".log");
    file_ = std::fopen(path_.c_str(), "a");
    if (!file_) {
      path_.clear();
      return;
    }
  }
  std::fwrite(text.data(), 1, text.size(), file_);
  std::fflush(file_);
}

std::string StderrFilter::line(std::string_view text) {
  const std::string_view content = text.substr(0, text.find('\n'));
  if (is_dashes(content)) {
    in_report_ = !in_report_;
    LaunchLog::get().write(text);
    return {};
  }
  if (in_report_) {
    LaunchLog::get().write(text);
    return {};
  }
  const std::string_view text_only = untagged(content);
  if (is_slurm_report(text_only)) {
    LaunchLog::get().write(text);
    return {};
  }
  if (text_only.starts_with(kErrorPrefix)) {
    errors_->emplace_back(text_only);
    return {};
  }
  return std::string(text);
}

std::string StderrFilter::take(std::string_view bytes) {
  pending_.append(bytes);
  std::string out;
  std::size_t start = 0;
  for (std::size_t nl; (nl = pending_.find('\n', start)) != std::string::npos; start = nl + 1)
    out += line(std::string_view(pending_).substr(start, nl + 1 - start));
  pending_.erase(0, start);
  // An unfinished line that cannot be held back goes now (a progress bar redraws in place).
  if (!pending_.empty() && !in_report_ && !may_be_held(pending_)) {
    out += pending_;
    pending_.clear();
  }
  return out;
}

std::string StderrFilter::finish() {
  std::string out = pending_.empty() ? std::string() : line(pending_);
  pending_.clear();
  return out;
}

std::vector<std::string> distinct_errors(const std::vector<std::string>& errors) {
  std::vector<std::string> out;
  std::set<std::string> said;
  for (const auto& e : errors) {
    std::string_view message = std::string_view(e).substr(kErrorPrefix.size());
    if (message.substr(0, 5) == "rank ")
      if (const auto colon = message.find(": "); colon != std::string_view::npos)
        message.remove_prefix(colon + 2);
    if (said.insert(std::string(message)).second) out.push_back(e);
  }
  return out;
}

}  // namespace distml::cli
