// `distml simulate`: a training step predicted on clusters of several sizes from a profile
// (docs/simulator.md).
#pragma once

namespace CLI {
class App;
}

namespace distml::cli {

void add_simulate_command(CLI::App& app);

}  // namespace distml::cli
