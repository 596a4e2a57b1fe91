// The distml command line, one subcommand per task. Built twice: distml, without LibTorch,
// which runs train, plan and rl by starting distml-torch (torch_commands.h), and distml-torch
// (DISTML_WITH_TORCH), which runs them.
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "bench.h"
#include "distml/core/allocator.h"
#include "distml/core/config_schema.h"
#include "distml/core/error.h"
#include "distml/core/preemption.h"
#include "distml/core/version.h"
#include "fit.h"
#include "launch.h"
#include "launcher_orders.h"
#include "plan.h"
#include "predict.h"
#include "report.h"
#include "rl.h"
#include "run_profile.h"
#include "simulate.h"
#include "slurm.h"
#include "torch_commands.h"
#include "train.h"

// Errors in what the user gave (flags, config, data, checkpoint, environment) exit with 2,
// a preempted run that checkpointed with 75 (core/preemption.h), others with 1.
static bool fixable_by_user(const std::exception& e) {
  return dynamic_cast<const distml::UsageError*>(&e) ||
         dynamic_cast<const distml::ConfigError*>(&e) ||
         dynamic_cast<const distml::DataError*>(&e) ||
         dynamic_cast<const distml::CheckpointError*>(&e) ||
         dynamic_cast<const distml::EnvError*>(&e);
}

// A rank that distml launch started (directly, or under the mpirun it started) dies with the
// process that started it, so that a launcher killed outright (SIGKILL: the OOM killer, a
// scheduler's hard kill) leaves no rank training on into the same checkpoint folder. A rank
// that takes the launcher's orders on its standard input ends when that closes instead
// (launcher_orders.h), which reaches across a remote shell where its parent (sshd) lives on.
// SIGUSR2, which the launcher passes on (a warning ahead of a time limit, where a job asks for
// it), only tells: it does not end a rank.
static void die_with_launcher() {
  if (!std::getenv(distml::cli::kLaunchedVar)) return;
  ::signal(SIGUSR2, SIG_IGN);
  if (std::getenv(distml::cli::kOrdersVar)) return;
  const pid_t parent = ::getppid();
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) std::_Exit(128 + SIGKILL);  // it died before the line above
}

// "rank R: " in a rank that a launcher started (its rank from gloo's, Open MPI's or Slurm's
// variable), so that the launcher's one line about an error names the rank that found it.
static std::string which_rank() {
  if (!std::getenv(distml::cli::kLaunchedVar) && !std::getenv("SLURM_STEP_ID")) return {};
  for (const char* var : {"RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID"})
    if (const char* rank = std::getenv(var)) return distml::cat("rank ", rank, ": ");
  return {};
}

// A first word that names no command: CLI11 would say only "A subcommand is required".
static void refuse_unknown_command(CLI::App& app, int argc, char** argv) {
  if (argc < 2 || argv[1][0] == '-') return;
  const std::string word = argv[1];
  std::string nearest, names;
  std::size_t best = 3;  // at most 2 edits: a typo, not another word
  for (const CLI::App* command : app.get_subcommands([](CLI::App*) { return true; })) {
    const std::string& name = command->get_name();
    if (name == word) return;
    names += (names.empty() ? "" : ", ") + name;
    if (const std::size_t d = distml::config::edit_distance(word, name); d < best) {
      best = d;
      nearest = name;
    }
  }
  throw distml::UsageError(distml::cat(
      "unknown command '", word, "'; ",
      nearest.empty() ? "the commands are " + names : "did you mean '" + nearest + "'?"));
}

int main(int argc, char** argv) {
  distml::keep_freed_memory_for_reuse();
  die_with_launcher();
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
      "reinforcement learning) over MPI, Gloo or in-process ranks.",
      "distml"};  // the name in "Usage:", not the path of the binary that runs it
  distml::cli::follow_launcher_orders();  // here: the process that runs the command
  app.set_version_flag("--version", distml::kVersion);
  app.require_subcommand(1);
  distml::cli::add_launch_command(app);
  distml::cli::add_bench_command(app, argc, argv);
#ifdef DISTML_WITH_TORCH
  distml::cli::add_train_command(app, argc, argv);
  distml::cli::add_plan_command(app, argc, argv);
  distml::cli::add_rl_command(app, argc, argv);
  distml::cli::add_simulate_command(app);
  distml::cli::add_profile_command(app);
#else
  distml::cli::list_torch_commands(app);
#endif
  distml::cli::add_fit_command(app, argc, argv);
  distml::cli::add_predict_command(app, argc, argv);
  distml::cli::add_report_command(app);
  try {
    refuse_unknown_command(app, argc, argv);
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
    const bool preempted = dynamic_cast<const distml::Preempted*>(&e);
    if (!preempted)
      std::fprintf(stderr, "distml: error: %s%s\n", which_rank().c_str(), e.what());
    else if (*e.what())  // one rank says it for all
      std::fprintf(stderr, "distml: %s\n", e.what());
    std::fflush(stdout);
    std::fflush(stderr);
    std::_Exit(preempted ? distml::kPreemptedExitCode : fixable_by_user(e) ? 2 : 1);
  }
  return 0;
}
