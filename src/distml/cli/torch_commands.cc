#include "torch_commands.h"

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string_view>

#include "distml/core/error.h"

namespace distml::cli {

const char* const kTrainDescription =
    "Train a model with synchronous data parallelism (bucketed all-reduce overlapped with "
    "backward), from a TOML config.\nExample: distml train --config examples/mnist_lenet.toml "
    "--np 2 --set train.epochs=3\nConfig keys (section.key): see docs/training.md, or "
    "--print-config for every key with its value, default and source.";

const char* const kPlanDescription =
    "Choose the grid (pipeline stages x data replicas), micro-batches and partition that the "
    "pipeline cost model predicts to train a config fastest on --np ranks: the layers are "
    "measured on this machine, the link between two ranks too (or given).\nExample: distml "
    "plan --config examples/mnist_mlp.toml --np 2 --micro-batches auto --measure\nSee "
    "docs/training.md, \"Planning\".";

const char* const kRlDescription =
    "Distributed deep reinforcement learning: PPO/DPPO and A2C (synchronous actor-learners), "
    "A3C (asynchronous gradients to a parameter holder), IMPALA (actors and a V-trace "
    "learner), Ape-X DQN and Ape-X DPG (actors, a prioritised replay rank, a learner).\n"
    "Example: distml rl ppo --env cartpole --np 2 --json\n"
    "Without --config it uses the tuned defaults of examples/rl/ALGO_ENV.toml; "
    "--print-config shows what a run would use. Config keys: see docs/rl.md.";

const char* const kSimulateDescription =
    "Predict a training step on clusters larger than this machine from a profile (distml "
    "train --profile FILE), replaying the strategy's own decisions (buckets, all-reduce "
    "algorithm, overlap, shards, periods, topology, compressor, pipeline schedule) on hosts "
    "joined by links of the given bandwidth and latency (or fitted by --link-from).\n"
    "Example: distml simulate --profile lenet.json --hosts 1,2,4,8 --ranks-per-host 4 "
    "--bandwidth 10gbit --latency 20us\nSee docs/simulator.md.";

const char* const kProfileDescription =
    "Write the profile distml simulate reads from a finished run that kept its timeline "
    "(distml train --run-dir DIR --timeline), as distml train --profile would have: the step's "
    "phases from rank 0's timeline, the layers measured on this machine.\n"
    "Example: distml profile runs/a --out a.json\nSee docs/simulator.md.";

namespace {

// The subcommands distml-torch runs, with their --help text.
const std::pair<std::string_view, const char*> kTorchCommands[] = {
    {"train", kTrainDescription},
    {"plan", kPlanDescription},
    {"rl", kRlDescription},
    {"simulate", kSimulateDescription},
    {"profile", kProfileDescription}};

}  // namespace

bool needs_torch(int argc, char** argv) {
  if (argc < 2) return false;
  const std::string_view name = argv[1];
  for (const auto& command : kTorchCommands)
    if (name == command.first) return true;
  if (name == "launch") return false;  // it starts the ranks; the ranks connect
  // The gloo engine: --engine gloo (the last one given wins, as in the parser), else
  // DISTML_ENGINE, which launch sets for the ranks.
  std::string_view engine;
  if (const char* e = std::getenv("DISTML_ENGINE")) engine = e;
  for (int i = 2; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a == "--engine" && i + 1 < argc) engine = argv[++i];
    if (a.starts_with("--engine=")) engine = a.substr(9);
  }
  return engine == "gloo";
}

void run_torch_command(char** argv) {
  const auto self = std::filesystem::read_symlink("/proc/self/exe");
  const std::string torch = (self.parent_path() / "distml-torch").string();
  argv[0] = const_cast<char*>(torch.c_str());
  ::execv(torch.c_str(), argv);
  throw Error(cat("distml ", argv[1], " runs in ", torch, ", which could not start: ",
                  std::strerror(errno), " (it is built beside distml)"));
}

void list_torch_commands(CLI::App& app) {
  for (const auto& [name, description] : kTorchCommands)
    app.add_subcommand(std::string(name), description)->allow_extras();
}

}  // namespace distml::cli
