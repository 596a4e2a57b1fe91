#include "event_printer.h"

#include <iostream>

#include "launch.h"

namespace distml::cli {

EventPrinter::EventPrinter(bool json, std::string unit)
    : json_(json), bar_enabled_(!json && stdout_is_terminal()), bar_(stdout, std::move(unit)) {}

bool EventPrinter::print_json(const nlohmann::json& e) {
  if (json_) {
    std::cout << e.dump() << std::endl;
    return true;
  }
  if (bar_enabled_) bar_.clear();
  return false;
}

void EventPrinter::progress(std::int64_t done, std::int64_t total) {
  if (bar_enabled_) bar_.update(done, total);
}

void EventPrinter::finish() {
  if (bar_enabled_) bar_.clear();
}

}  // namespace distml::cli
