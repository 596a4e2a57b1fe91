// `distml rl`: distributed deep reinforcement learning (PPO, A2C, A3C, IMPALA, Ape-X).
#pragma once

namespace CLI {
class App;
}

namespace distml::cli {

/// Adds the `rl` subcommand; argc/argv are kept for the --np relaunch.
void add_rl_command(CLI::App& app, int argc, char** argv);

}  // namespace distml::cli
