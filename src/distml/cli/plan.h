// `distml plan`: the grid, micro-batches and pipeline partition predicted to train a config
// fastest on N ranks, and with --measure the step time it really takes.
#pragma once

namespace CLI {
class App;
}

namespace distml::cli {

/// Adds the `plan` subcommand; argc/argv are kept for the --np relaunch.
void add_plan_command(CLI::App& app, int argc, char** argv);

}  // namespace distml::cli
