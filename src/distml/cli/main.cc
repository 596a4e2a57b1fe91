// The distml command line, one subcommand per task. Built twice: distml, without LibTorch,
// which runs train, plan and rl by starting distml-torch (torch_commands.h), and distml-torch
// (DISTML_WITH_TORCH), which runs them.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>

#include "bench.h"
#include "distml/core/error.h"
#include "distml/core/version.h"
#include "fit.h"
#include "launch.h"
#include "plan.h"
#include "predict.h"
#include "report.h"
#include "rl.h"
#include "slurm.h"
#include "torch_commands.h"
#include "train.h"

// Errors in what the user gave (flags, config, data, checkpoint, environment) exit with 2,
// others with 1.
static bool fixable_by_user(const std::exception& e) {
  return dynamic_cast<const distml::UsageError*>(&e) ||
         dynamic_cast<const distml::ConfigError*>(&e) ||
         dynamic_cast<const distml::DataError*>(&e) ||
         dynamic_cast<const distml::CheckpointError*>(&e) ||
         dynamic_cast<const distml::EnvError*>(&e);
}

int main(int argc, char** argv) {
  distml::cli::default_to_gloo_under_srun();  // before the engine picks the binary and defaults
#ifndef DISTML_WITH_TORCH
  if (distml::cli::needs_torch(argc, argv)) {
    try {
      distml::cli::run_torch_command(argv);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "distml: error: %s\n", e.what());
      return 1;
    }
  }
#endif
  CLI::App app{
      "distml: distributed machine learning in C++ (classical ML, deep learning, deep "
      "reinforcement learning) over MPI, Gloo or in-process ranks."};
  app.set_version_flag("--version", distml::kVersion);
  app.require_subcommand(1);
  distml::cli::add_launch_command(app);
  distml::cli::add_bench_command(app, argc, argv);
#ifdef DISTML_WITH_TORCH
  distml::cli::add_train_command(app, argc, argv);
  distml::cli::add_plan_command(app, argc, argv);
  distml::cli::add_rl_command(app, argc, argv);
#else
  distml::cli::list_torch_commands(app);
#endif
  distml::cli::add_fit_command(app, argc, argv);
  distml::cli::add_predict_command(app, argc, argv);
  distml::cli::add_report_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return 2;
  } catch (const std::exception& e) {
    // Peers may be waiting in an operation this rank will never join (or stuck in one it
    // left): leave without running exit handlers, whose finalisation of the engine waits for
    // every rank, so that the launcher ends the job at once. The stack is unwound already.
    std::fprintf(stderr, "distml: error: %s\n", e.what());
    std::fflush(stdout);
    std::fflush(stderr);
    std::_Exit(fixable_by_user(e) ? 2 : 1);
  }
  return 0;
}
