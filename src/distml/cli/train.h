// `distml train`: data-parallel training of a model zoo network from a TOML config.
#pragma once

namespace CLI {
class App;
}

namespace distml::cli {

/// Adds the `train` subcommand; argc/argv are kept for the --np relaunch.
void add_train_command(CLI::App& app, int argc, char** argv);

}  // namespace distml::cli
