// What rank 0 of a long run shows: JSON lines with --json; else text lines, above a progress
// bar when stdout is a terminal.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "progress_bar.h"

namespace distml::cli {

class EventPrinter {
 public:
  /// `unit` names what the bar counts ("steps").
  EventPrinter(bool json, std::string unit);
  /// With --json prints `e` as one line and returns true; otherwise clears the bar for the
  /// caller's text line and returns false.
  bool print_json(const nlohmann::json& e);
  void progress(std::int64_t done, std::int64_t total);
  /// Clears the bar before the run's last words.
  void finish();

 private:
  bool json_;
  bool bar_enabled_;
  ProgressBar bar_;
};

}  // namespace distml::cli
