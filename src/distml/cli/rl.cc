#include "rl.h"

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>

#include "distml/comm/engines.h"
#include "distml/comm/timeline_exchange.h"
#include "distml/core/atomic_file.h"
#include "distml/core/clock.h"
#include "distml/core/error.h"
#include "distml/core/installed_path.h"
#include "distml/core/preemption.h"
#include "distml/rl/algos/algorithm.h"
#include "distml/rl/envs/env.h"
#include "distml/rl/run_monitor.h"
#include "distml/train/checkpoint_file.h"
#include "distml/train/checkpoint_owner.h"
#include "event_printer.h"
#include "launch.h"
#include "run_dir.h"
#include "torch_commands.h"

namespace distml::cli {
namespace {

struct RlOptions {
  std::string algo;
  std::string env = "cartpole";
  std::string config_path;
  std::vector<std::string> sets;
  int np = 0;
  bool np_given = false;
  std::string engine = "mpi";
  std::string resume;
  bool json = false;
  std::string timeline_path;    // --timeline FILE; empty: none
  bool timeline_given = false;  // --timeline, with or without FILE (run_dir.h)
  std::string run_dir;
  LaunchOptions supervision;  // --max-restarts
  bool print_config = false;
};

// The tuned defaults of an (algorithm, environment) pair, when the examples have them.
std::string tuned_config(const std::string& algo, const std::string& env) {
  std::string dir = installed_or_source("examples/rl", DISTML_RL_EXAMPLES);
  if (const char* d = std::getenv("DISTML_RL_EXAMPLES")) dir = d;
  const std::string path = dir + "/" + algo + "_" + env + ".toml";
  std::error_code ignored;
  return std::filesystem::is_regular_file(path, ignored) ? path : "";
}

// The cores the run's threads can keep busy, for "env steps/s per core": each rank's intra-op
// threads plus its environment workers, at most the cores of this machine (a run across hosts
// is counted as if all its ranks shared rank 0's).
int cores_in_use(const rl::RlConfig& config, int ranks) {
  const std::int64_t env_workers = config.run.env_workers > 1 ? config.run.env_workers : 0;
  const std::int64_t threads = ranks * (config.run.threads + env_workers);
  return static_cast<int>(
      std::min<std::int64_t>(threads, std::max(1u, std::thread::hardware_concurrency())));
}

// Rank 0's text lines for the run's events.
void print_rl_event(EventPrinter& printer, const nlohmann::json& e) {
  if (printer.print_json(e)) return;
  const std::string kind = e["event"];
  if (kind == "update")
    std::printf("update %lld  env steps %lld  train return %s  %.0f env steps/s\n",
                e["update"].get<long long>(), e["env_steps"].get<long long>(),
                e["train_return"].is_null() ? "-" : cat(e["train_return"].get<double>()).c_str(),
                e["env_steps_per_sec"].get<double>());
  else if (kind == "eval")
    std::printf("update %lld  env steps %lld  eval return %.2f over %lld episodes\n",
                e["update"].get<long long>(), e["env_steps"].get<long long>(),
                e["eval_mean_return"].get<double>(), e["eval_episodes"].get<long long>());
  else if (kind == "target")
    std::printf("env steps %lld  %s return %.2f reached the target %.2f: stopping\n",
                e["env_steps"].get<long long>(),
                e["metric"] == "train" ? "training (last 100 episodes)" : "evaluation",
                e["value"].get<double>(), e["target_return"].get<double>());
  else if (kind == "checkpoint")
    std::printf("update %lld  checkpoint %s\n", e["update"].get<long long>(),
                e["path"].get<std::string>().c_str());
  else if (kind == "note")
    std::fprintf(stderr, "distml rl: %s\n", e["message"].get<std::string>().c_str());
  else if (kind == "actor_lost")
    std::printf("actor rank %d lost (%s); %s\n", e["rank"].get<int>(),
                e["reason"].get<std::string>().c_str(), e["action"].get<std::string>().c_str());
  std::fflush(stdout);
}

// A fresh run (or its restart) needs run.checkpoint_dir empty or its own; --resume of that very
// folder continues it.
void claim_rl_checkpoint_dir(const rl::RlConfig& config) {
  namespace fs = std::filesystem;
  const auto& dir = config.run.checkpoint_dir;
  if (dir.empty()) return;
  const bool continues = !config.run.resume.empty() &&
                         fs::weakly_canonical(config.run.resume) == fs::weakly_canonical(dir);
  std::vector<std::string> checkpoints;
  if (fs::exists(rl::checkpoint_path(dir))) checkpoints.push_back(rl::checkpoint_path(dir));
  const auto id = train::claim_checkpoint_dir(
      dir, checkpoints, this_run_id(), continues ? train::Arrival::resuming : train::Arrival::fresh,
      "run.checkpoint_dir");
  if (id != this_run_id()) ::setenv(kRunIdVar, id.c_str(), 1);  // goes on as the folder's run
}

void rl_rank(const rl::RlConfig& config, const RlOptions& o, comm::Communicator& comm,
             Clock::time_point start, RunDir* run_dir) {
  if (comm.rank() == 0) claim_rl_checkpoint_dir(config);  // ranks a launcher started: here
  // Aligns the clocks first; one file per attempt (a restart's does not overwrite).
  comm::TimelineRecording recording(comm, o.timeline_path, restarts_so_far());
  if (const int restarts = restarts_so_far(); restarts > 0 && comm.rank() == 0)
    std::fprintf(stderr, "distml: restart %d: %s\n", restarts,
                 config.run.resume.empty()
                     ? "no checkpoint was written yet; starting over"
                     : cat("resuming from ", rl::checkpoint_path(config.run.resume)).c_str());
  std::optional<EventPrinter> printer;
  rl::RunHooks hooks;
  hooks.timeline = recording.timeline();
  if (comm.rank() == 0) {
    printer.emplace(o.json, "env steps");
    if (run_dir) run_dir->begin(rl::canonical_text(config));
    hooks.event = [&](const nlohmann::json& e) {
      if (run_dir) run_dir->record(e);
      print_rl_event(*printer, e);
    };
    hooks.progress = [&](std::int64_t done, std::int64_t total) { printer->progress(done, total); };
  } else {  // the replay of apex watches actors too: its losses go to stderr
    hooks.event = [rank = comm.rank()](const nlohmann::json& e) {
      if (e["event"] == "actor_lost")
        std::fprintf(stderr, "distml rl: rank %d: actor rank %d lost (%s); %s\n", rank,
                     e["rank"].get<int>(), e["reason"].get<std::string>().c_str(),
                     e["action"].get<std::string>().c_str());
    };
  }
  const rl::RunResult r = rl::run_algorithm(config, comm, hooks);
  recording.finish();  // rank 0 writes every rank's events
  if (comm.rank() != 0) return;
  printer->finish();
  if (r.preempted)
    throw Preempted(cat("preempted: stopped after update ", r.updates, " (", r.env_steps,
                        " env steps), checkpointed in ",
                        rl::checkpoint_path(config.run.checkpoint_dir), "; go on with --resume ",
                        config.run.checkpoint_dir));
  const double wall_s = seconds_since(start);
  const int cores = cores_in_use(config, comm.size());
  const double per_core = r.env_steps_per_sec / cores;
  if (o.json || run_dir) {
    nlohmann::json done = {{"event", "done"},
                           {"algo", config.algo.name},
                           {"env", config.env.name},
                           {"eval_mean_return", r.eval_mean_return},
                           {"eval_episodes", r.eval_episodes},
                           {"env_steps", r.env_steps},
                           {"env_steps_per_sec", r.env_steps_per_sec},
                           {"cores", cores},
                           {"env_steps_per_sec_per_core", per_core},
                           {"np", comm.size()},
                           {"restarts", restarts_so_far()},
                           {"wall_s", wall_s}};
    done.update(r.report);
    if (run_dir) run_dir->finish(done);
    if (o.json) std::cout << done.dump() << std::endl;
  }
  if (!o.json) {
    std::printf(
        "%s on %s: mean return %.2f over %lld evaluation episodes after %lld env steps "
        "(%.0f env steps/s, %.0f per core of %d); %.1f s in all\n",
        config.algo.name.c_str(), config.env.name.c_str(), r.eval_mean_return,
        static_cast<long long>(r.eval_episodes), static_cast<long long>(r.env_steps),
        r.env_steps_per_sec, per_core, cores, wall_s);
  }
}

void run(RlOptions o, int argc, char** argv) {
  const auto start = Clock::now();
  if (o.np_given && o.np < 1) throw UsageError(cat("--np must be at least 1, got ", o.np));
  comm::check_engine_name(o.engine);
  std::string path = o.config_path;
  if (path.empty()) {
    path = tuned_config(o.algo, o.env);
    if (path.empty() && !std::getenv(kLaunchedVar) && !o.print_config)  // said once
      std::fprintf(stderr, "distml rl: no tuned defaults for %s on %s; using the built-in ones\n",
                   o.algo.c_str(), o.env.c_str());
  }
  std::vector<std::string> sets = {"algo.name=" + o.algo, "env.name=" + o.env};
  if (!o.resume.empty()) sets.push_back("run.resume=" + o.resume);
  sets.insert(sets.end(), o.sets.begin(), o.sets.end());
  rl::RlConfig config = rl::load_rl_config(path, sets);
  if (o.print_config) {
    std::cout << "# distml rl " << o.algo << " --env " << o.env << ": "
              << (!o.config_path.empty() ? "the config file " + path
                  : path.empty()         ? std::string("the built-in defaults (no tuned file)")
                                         : "the tuned file " + path)
              << ", then --set\n"
              << rl::described_config(config);
    return;
  }
  if (!config.run.resume.empty() && config.run.checkpoint_dir.empty())
    config.run.checkpoint_dir = config.run.resume;  // a resumed run goes on saving there
  adopt_launcher_policy(o.supervision);             // under distml launch --max-restarts/--min-np
  check_restart_options(o.supervision, o.engine, o.np_given,
                        {"run", config.run.checkpoint_dir, config.run.checkpoint_every});
  // Before the run: not lost to an unwritable path found when it saves.
  if (!config.run.checkpoint_dir.empty())
    check_writable_folder(config.run.checkpoint_dir, "run.checkpoint_dir");
  if (!o.timeline_path.empty()) check_writable_file(o.timeline_path, "--timeline");
  const int restarts = restarts_so_far();
  // Once, before any rank starts, by the process that starts them (checkpoint_owner.h); the
  // run id passes to the ranks and to every restart in the environment. Ranks that srun or
  // mpirun started have rank 0 claim it (rl_rank).
  if (!std::getenv(kLaunchedVar) && (o.np_given || o.engine == "local"))
    claim_rl_checkpoint_dir(config);
  // A restarted job resumes from its checkpoint where it wrote one (every rank sees the same
  // file on one machine; across hosts, put run.checkpoint_dir on a shared file system).
  const auto own = rl::checkpoint_path(config.run.checkpoint_dir);
  if (restarts > 0 && train::checked_file_run_id(own) == this_run_id())
    config.run.resume = config.run.checkpoint_dir;
  // Checked by every process before any rank writes.
  std::optional<RunDir> run_dir;
  if (!o.run_dir.empty()) run_dir.emplace(o.run_dir, !config.run.resume.empty() || restarts > 0);
  o.timeline_path =
      timeline_destination(run_dir ? &*run_dir : nullptr, o.timeline_given, o.timeline_path);
  if (o.engine != "local") relaunch_if_requested(o.np, o.engine, argc, argv, o.supervision);
  // A rank from here on. With checkpoints a preemption stops after an update and saves it.
  if (!config.run.checkpoint_dir.empty()) catch_preemption_signals();

  comm::CommOptions copts;
  copts.timeout = comm::Millis(static_cast<long long>(config.run.timeout_s * 1000));
  copts.stall_warn = comm::Millis(static_cast<long long>(config.run.stall_warn_s * 1000));
  copts.fingerprint = rl::fingerprint(config);
  run_on_ranks(o.engine, o.np, copts, [&](comm::Communicator& comm) {
    rl_rank(config, o, comm, start, run_dir ? &*run_dir : nullptr);
  });
}

}  // namespace

void add_rl_command(CLI::App& app, int argc, char** argv) {
  auto o = std::make_shared<RlOptions>();
  if (const char* e = std::getenv(kEngineVar)) o->engine = e;
  std::string envs;
  for (const auto& name : rl::env_names()) envs += (envs.empty() ? "" : " | ") + name;
  auto* sub = app.add_subcommand("rl", kRlDescription);
  sub->add_option("algorithm", o->algo, "ppo | a2c | a3c | impala | apex | apex_dpg")
      ->required()
      ->check(CLI::IsMember(rl::algorithm_names()));
  sub->add_option("--env", o->env,
                  "The environment: " + envs +
                      ", or exec:COMMAND, an external process (docs/rl.md, \"Your own "
                      "environments\")")
      ->check(CLI::Validator(
          [](const std::string& name) {
            return rl::env_exists(name)
                       ? std::string()
                       : "unknown environment '" + name + "'; expected one of " + rl::env_choices();
          },
          "ENV"))
      ->capture_default_str();
  sub->add_option("--config", o->config_path,
                  "TOML file with [env] [network] [optim] [algo] [normalize] [impala] [apex] "
                  "[run] (default: examples/rl/ALGO_ENV.toml where it exists, else built-in "
                  "defaults)");
  sub->add_option("--set", o->sets,
                  "Override a config key: --set run.env_steps=50000 (repeatable)");
  auto* np =
      sub->add_option("--np", o->np, "Ranks (relaunches under distml launch; threads for local)");
  sub->add_option("--engine", o->engine, "mpi | gloo | local");
  sub->add_option("--resume", o->resume,
                  "Continue from the checkpoint in this directory (and keep saving there)");
  sub->add_flag("--json", o->json, "Events as JSON lines on stdout; the last is the done line");
  auto* timeline =
      sub->add_option("--timeline", o->timeline_path,
                      "Write every rank's rollouts, learner updates and waits to this file as a "
                      "Chrome-trace JSON (open it in ui.perfetto.dev)");
  timeline->expected(0, 1);  // with --run-dir, no FILE: DIR/timeline.json
  add_run_dir_option(*sub, o->run_dir);
  add_restart_options(*sub, o->supervision, /*elastic=*/false);
  sub->add_flag("--print-config", o->print_config,
                "Print every config key with its resolved value and where it came from (the "
                "tuned or given file, --set, or the default), then exit");
  sub->callback([o, np, timeline, argc, argv] {
    o->np_given = np->count() > 0;
    o->timeline_given = timeline->count() > 0;
    run(*o, argc, argv);
  });
}

}  // namespace distml::cli
