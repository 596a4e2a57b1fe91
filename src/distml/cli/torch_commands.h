// What needs LibTorch (train, plan, rl, and the gloo engine, whose rendezvous is c10d's) runs
// in a second binary, distml-torch, beside distml. Loading LibTorch with the libraries it pulls
// in takes about a second of CPU per process; fit, predict, launch and bench over mpi or local
// ranks do not need it. distml lists the three subcommands and hands them, and any command on
// the gloo engine, to distml-torch with the same arguments (run_torch_command).
#pragma once

namespace CLI {
class App;
}

namespace distml::cli {

/// What `distml --help` says of each.
extern const char* const kTrainDescription;
extern const char* const kPlanDescription;
extern const char* const kRlDescription;
extern const char* const kSimulateDescription;
extern const char* const kProfileDescription;

/// Whether argv needs distml-torch: argv[1] is train, plan, rl, simulate or profile, or a
/// subcommand other than launch runs on the gloo engine (--engine gloo, or DISTML_ENGINE=gloo
/// without
/// --engine).
bool needs_torch(int argc, char** argv);

/// Runs distml-torch from distml's own folder with argv; returns only by throwing Error when
/// it cannot.
[[noreturn]] void run_torch_command(char** argv);

/// Lists train, plan, rl, simulate and profile in `app` (for --help); distml runs them with
/// run_torch_command.
void list_torch_commands(CLI::App& app);

}  // namespace distml::cli
