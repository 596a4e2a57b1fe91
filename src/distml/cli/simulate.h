// `distml simulate`: a training step predicted on clusters of several sizes from a profile
// (docs/simulator.md).
#pragma once

#include <string>

namespace CLI {
class App;
}

namespace distml::cli {

void add_simulate_command(CLI::App& app);

/// Seconds of a duration such as "50us", "1.5ms", "0.2s" or "0". UsageError naming `what`.
double parse_duration_s(const std::string& text, const std::string& what);

}  // namespace distml::cli
