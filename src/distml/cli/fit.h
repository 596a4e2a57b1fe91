// `distml fit` and `distml predict`: the classical estimators on row-sharded data.
#pragma once

namespace CLI {
class App;
}

namespace distml::cli {

/// Adds the `fit` and `predict` subcommands; argc/argv are kept for the --np relaunch.
void add_fit_commands(CLI::App& app, int argc, char** argv);

}  // namespace distml::cli
