#include "job_output.h"

#include <unistd.h>

#include <cstdlib>
#include <set>

#include "distml/core/error.h"

namespace distml::cli {
namespace {

constexpr std::string_view kErrorPrefix = "distml: error: ";

bool is_dashes(std::string_view line) {
  return line.size() >= 20 && line.find_first_not_of('-') == std::string_view::npos;
}

// Whether `start` could still become a line that is held back (an error, a line of dashes).
bool may_be_held(std::string_view start) {
  const auto prefix_of = [&](std::string_view whole) {
    return whole.substr(0, std::min(start.size(), whole.size())) ==
           start.substr(0, std::min(start.size(), whole.size()));
  };
  return prefix_of(kErrorPrefix) || start.find_first_not_of('-') == std::string_view::npos;
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
  if (content.substr(0, kErrorPrefix.size()) == kErrorPrefix) {
    errors_->emplace_back(content);
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
