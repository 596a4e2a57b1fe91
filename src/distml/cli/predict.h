// `distml predict`: a model written by `distml fit` applied to a data file.
#pragma once

namespace CLI {
class App;
}

namespace distml::cli {

/// Adds the `predict` subcommand; argc/argv are kept for the --np relaunch.
void add_predict_command(CLI::App& app, int argc, char** argv);

}  // namespace distml::cli
