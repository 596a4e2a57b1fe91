// `distml bench`: collective benchmarks in the manner of nccl-tests and the OSU suite, with
// raw MPI run on the same buffers in the same job as the baseline.
#pragma once

namespace CLI {
class App;
}

namespace distml::cli {

/// Adds the `bench` subcommand; argc/argv are kept for the --np relaunch.
void add_bench_command(CLI::App& app, int argc, char** argv);

}  // namespace distml::cli
