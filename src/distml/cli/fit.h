// `distml fit`: a classical estimator fitted on row-sharded data.
#pragma once

namespace CLI {
class App;
}

namespace distml::cli {

/// Adds the `fit` subcommand; argc/argv are kept for the --np relaunch.
void add_fit_command(CLI::App& app, int argc, char** argv);

}  // namespace distml::cli
