// A one-line progress bar with rate and ETA, redrawn in place on a terminal.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace distml::cli {

class ProgressBar {
 public:
  /// Draws on `out`, which should be a terminal; `unit` names what is counted ("steps").
  ProgressBar(std::FILE* out, std::string unit);
  /// Redraws with `done` of `total` (at most ten times a second, and always at the end).
  void update(std::int64_t done, std::int64_t total, const std::string& note = "");
  /// Clears the line, so that normal output continues where the bar was.
  void clear();

 private:
  using Clock = std::chrono::steady_clock;
  std::FILE* out_;
  std::string unit_;
  Clock::time_point start_ = Clock::now(), last_draw_{};
  std::int64_t first_done_ = -1;
};

/// "1h02m", "3m05s", "42s".
std::string format_duration(double seconds);

}  // namespace distml::cli
