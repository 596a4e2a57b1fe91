#include "train.h"

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>

#include "distml/comm/engines.h"
#include "distml/comm/timeline_exchange.h"
#include "distml/core/atomic_file.h"
#include "distml/core/clock.h"
#include "distml/core/error.h"
#include "distml/core/parse.h"
#include "distml/core/peak_rss.h"
#include "distml/core/preemption.h"
#include "distml/core/run_id.h"
#include "distml/train/checkpoint_dir.h"
#include "distml/train/checkpoint_owner.h"
#include "distml/train/strategy_factory.h"
#include "distml/train/trainer.h"
#include "event_printer.h"
#include "launch.h"
#include "run_dir.h"
#include "torch_commands.h"
#include "train_profile.h"

namespace distml::cli {
namespace {

struct TrainOptions {
  std::string config_path;
  std::vector<std::string> sets;
  int np = 0;
  bool np_given = false;
  std::string engine = "mpi";
  std::string resume;
  bool json = false;
  bool print_config = false;
  std::string timeline_path;    // --timeline FILE; empty: none
  std::string profile_path;     // --profile FILE; empty: none
  bool timeline_given = false;  // --timeline, with or without FILE (run_dir.h)
  std::string run_dir;
  LaunchOptions supervision;  // --max-restarts, --min-np
};

std::string hex(std::uint64_t v) {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(v));
  return text;
}

nlohmann::json done_line(const train::TrainResult& r, const train::TaskData& data,
                         const std::string& loss, int np, const std::string& engine) {
  nlohmann::json j = {{"event", "done"},
                      {"steps", r.steps},
                      {"global_step", r.global_step},
                      {"steps_per_sec", r.steps_per_sec},
                      {"samples_per_sec", r.samples_per_sec},
                      {"comm_time_s", r.comm_time_s},
                      {"overlap_fraction", r.overlap_fraction},
                      {"early_bucket_launches", r.early_bucket_launches},
                      {"bytes_sent", r.bytes_sent},
                      {"consensus_distance", r.consensus_distance},
                      {"optimizer_state_bytes", r.optimizer_state_bytes},
                      {"peak_rss_mb", peak_rss_mb()},
                      {"param_checksum", hex(r.param_checksum)},
                      {"np", np},
                      {"engine", engine},
                      {"restarts", restarts_so_far()},
                      {"wall_s", r.wall_s}};
  j.update(train::test_metrics(r.test, loss, data.kind));
  j.update(r.strategy_report);
  return j;
}

void print_summary(const train::TrainResult& r, const train::TaskData& data,
                   const std::string& loss) {
  if (data.kind == train::TaskKind::language_model)
    std::printf("test perplexity %.3f (loss %.4f, character accuracy %.2f%%)", r.test.perplexity,
                r.test.loss, 100 * r.test.accuracy);
  else if (loss == "mse")
    std::printf("test MSE %.5g, R^2 %.4f", r.test.mse, r.test.r2);
  else if (loss == "model")
    std::printf("test loss %.5g", r.test.loss);
  else
    std::printf("test accuracy %.2f%% (loss %.4f)", 100 * r.test.accuracy, r.test.loss);
  std::printf(
      " after %lld steps; %.1f steps/s, %.0f samples/s; all-reduce %.2f s, %.0f%% "
      "overlapped with backward; %.1f s in all\n",
      static_cast<long long>(r.global_step), r.steps_per_sec, r.samples_per_sec, r.comm_time_s,
      100 * r.overlap_fraction, r.wall_s);
}

// The task's own metrics of an eval event (train::test_metrics), as text: "  test accuracy
// 97.10%", "  test MSE 0.0123  R^2 0.9512", "  perplexity 4.210".
std::string task_metrics_text(const nlohmann::json& e) {
  char text[96] = "";
  if (e.contains("test_perplexity"))
    std::snprintf(text, sizeof text, "  perplexity %.3f", e["test_perplexity"].get<double>());
  else if (e.contains("test_accuracy"))
    std::snprintf(text, sizeof text, "  test accuracy %.2f%%",
                  100 * e["test_accuracy"].get<double>());
  else if (e.contains("test_r2"))
    std::snprintf(text, sizeof text, "  test MSE %.5g  R^2 %.4f", e["test_mse"].get<double>(),
                  e["test_r2"].get<double>());
  return text;
}

// Rank 0's text lines for the trainer's events.
void print_event(EventPrinter& printer, const nlohmann::json& e) {
  if (printer.print_json(e)) return;
  const std::string kind = e["event"];
  if (kind == "step")
    std::printf(
        "step %lld  epoch %lld  loss %.4f  lr %.4g  %.0f samples/s  all-reduce %.2f s "
        "(%.0f%% overlapped)\n",
        e["step"].get<long long>(), e["epoch"].get<long long>(), e["loss"].get<double>(),
        e["lr"].get<double>(), e["samples_per_sec"].get<double>(), e["comm_time_s"].get<double>(),
        100 * e["overlap_fraction"].get<double>());
  else if (kind == "eval")
    std::printf("step %lld  test loss %.4f%s\n", e["step"].get<long long>(),
                e["test_loss"].get<double>(), task_metrics_text(e).c_str());
  else if (kind == "checkpoint")
    std::printf("step %lld  checkpoint %s\n", e["step"].get<long long>(),
                e["path"].get<std::string>().c_str());
  std::fflush(stdout);
}

// --resume, and after a restart the newest checkpoint this run wrote in train.checkpoint_dir
// (where none was written yet, the run starts over). Rank 0 says where it resumed.
void resume_as_asked(train::Trainer& trainer, const train::TrainConfig& config,
                     const TrainOptions& o, const comm::Communicator& comm) {
  const int restarts = restarts_so_far();
  // Under --min-np a restart may have fewer ranks than the checkpoint (a rank or host lost), or
  // more (a host joined: launch --host-discovery); the sampler re-shards.
  const auto change =
      o.supervision.min_np > 0 ? train::WorldChange::elastic : train::WorldChange::refuse;
  std::optional<train::ResumePoint> from;
  if (restarts > 0) from = trainer.resume_own(config.train.checkpoint_dir, change);
  if (!from && !o.resume.empty()) from = trainer.resume(o.resume, change);
  if (comm.rank() != 0 || (restarts == 0 && !from)) return;
  if (!from) {
    std::fprintf(stderr, "distml: restart %d: no checkpoint was written yet; starting over\n",
                 restarts);
    return;
  }
  const int np = comm.size();
  const std::string ranks =
      from->saved_world_size != np
          ? cat(" on ", counted(np, "rank"), " (it was written by ", from->saved_world_size, ")")
          : std::string();
  const std::string restart = restarts > 0 ? cat("restart ", restarts, ": ") : std::string();
  std::fprintf(stderr, "distml: %sresuming from %s at step %lld%s\n", restart.c_str(),
               from->path.c_str(), static_cast<long long>(from->global_step), ranks.c_str());
}

// Whether this process starts the run's ranks: it is the run, not one rank of it.
bool starts_the_ranks(const TrainOptions& o) {
  return !std::getenv(kLaunchedVar) && (o.np_given || o.engine == "local");
}

// A run continues the checkpoints of train.checkpoint_dir only when --resume names that very
// folder; otherwise they must be its own (checkpoint_owner.h).
train::Arrival arrival_at_checkpoints(const TrainOptions& o, const train::TrainConfig& config) {
  namespace fs = std::filesystem;
  const bool continues = !o.resume.empty() && fs::weakly_canonical(o.resume) ==
                                                  fs::weakly_canonical(config.train.checkpoint_dir);
  return continues ? train::Arrival::resuming : train::Arrival::fresh;
}

// One rank's whole run; rank 0 reports.
void train_rank(const train::TrainConfig& config, const TrainOptions& o, comm::Communicator& comm,
                const train::TaskData& data, std::chrono::steady_clock::time_point start,
                RunDir* run_dir) {
  // Aligns the clocks first; one file per attempt (a restart's does not overwrite).
  comm::TimelineRecording recording(comm, o.timeline_path, restarts_so_far());
  train::Trainer trainer(config, comm, data);
  // --profile reads rank 0's timeline: recorded in memory where no file was asked for.
  std::optional<Timeline> for_profile;
  Timeline* timeline = recording.timeline();
  if (!o.profile_path.empty() && !timeline) timeline = &for_profile.emplace(comm.rank());
  trainer.claim_checkpoint_dir(arrival_at_checkpoints(o, config));
  resume_as_asked(trainer, config, o, comm);
  std::optional<EventPrinter> printer;
  if (comm.rank() == 0) printer.emplace(o.json, "steps");
  if (comm.rank() == 0 && run_dir) run_dir->begin(train::described_config(config));
  trainer.record_into(timeline);
  auto result = trainer.run(
      [&](nlohmann::json e) {
        e["elapsed_s"] = seconds_since(start);  // for plots against wall time (distml report)
        if (run_dir) run_dir->record(e);
        print_event(*printer, e);
      },
      [&](std::int64_t done, std::int64_t total) { printer->progress(done, total); });
  recording.finish();  // rank 0 writes every rank's events
  if (comm.rank() != 0) return;
  if (!o.profile_path.empty())
    sim::write_profile(measure_profile(*timeline, config, data, comm.size(), o.engine),
                       o.profile_path);
  printer->finish();
  result.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const auto done = done_line(result, data, config.train.loss, comm.size(), o.engine);
  if (run_dir) run_dir->finish(done);
  if (o.json)
    std::cout << done.dump() << std::endl;
  else
    print_summary(result, data, config.train.loss);
}

// Every path the run writes, before it starts: a run is not lost to an unwritable path found
// when it ends. The run directory checks its own (RunDir).
void check_output_paths(const train::TrainConfig& config, const TrainOptions& o) {
  const auto& t = config.train;
  if (!t.checkpoint_dir.empty()) check_writable_folder(t.checkpoint_dir, "train.checkpoint_dir");
  if (!t.export_path.empty()) check_writable_file(t.export_path, "train.export");
  if (!t.export_module.empty()) check_writable_file(t.export_module, "train.export_module");
  if (!o.timeline_path.empty()) check_writable_file(o.timeline_path, "--timeline");
  if (!o.profile_path.empty()) {
    check_writable_file(o.profile_path, "--profile");
    if (config.parallel.pipeline_stages > 1 || config.parallel.tensor > 1)
      throw UsageError(
          "--profile measures a data-parallel step; a pipeline or tensor-parallel run is "
          "measured by distml plan");
  }
}

// Restarts resume from checkpoints, and need a launcher that can start the ranks again; a run
// that shrinks needs a strategy and data that can go on with fewer ranks.
void check_supervision(const TrainOptions& o, const train::TrainConfig& config) {
  check_restart_options(o.supervision, o.engine, o.np_given,
                        {"train", config.train.checkpoint_dir, config.train.checkpoint_every});
  if (o.supervision.min_np == 0) return;
  if (const auto why = train::why_it_cannot_shrink(config); !why.empty())
    throw UsageError(cat("--min-np: ", why, "; use --max-restarts to restart on all ranks"));
}

void run(TrainOptions o, int argc, char** argv) {
  const auto start = std::chrono::steady_clock::now();
  if (o.np_given && o.np < 1) throw UsageError(cat("--np must be at least 1, got ", o.np));
  comm::check_engine_name(o.engine);
  // Read the config before starting ranks, so that a mistake is reported once.
  auto config = train::load_config(o.config_path, o.sets);
  if (o.print_config) {
    std::cout << train::described_config(config);
    return;
  }
  if (!o.resume.empty() && config.train.checkpoint_dir.empty())
    config.train.checkpoint_dir = o.resume;  // a resumed run goes on saving where it left off
  adopt_launcher_policy(o.supervision);      // under distml launch --max-restarts/--min-np
  check_supervision(o, config);
  check_output_paths(config, o);
  // Once, before any rank starts, by the process that starts them (the ranks then find the
  // folder theirs): the run id passes to them and to every restart in the environment. Ranks
  // that srun or mpirun started have rank 0 claim it (train_rank).
  if (const auto& dir = config.train.checkpoint_dir; !dir.empty() && starts_the_ranks(o)) {
    const auto id =
        train::claim_checkpoint_dir(dir, train::checkpoints_newest_first(dir), this_run_id(),
                                    arrival_at_checkpoints(o, config), "train.checkpoint_dir");
    ::setenv(kRunIdVar, id.c_str(), 1);  // a resumed run goes on as the folder's
  }
  this_run_id();  // set before any rank thread reads it
  // Checked by every process before any rank writes; a restarted job goes on in its folder.
  std::optional<RunDir> run_dir;
  if (!o.run_dir.empty()) run_dir.emplace(o.run_dir, !o.resume.empty() || restarts_so_far() > 0);
  o.timeline_path =
      timeline_destination(run_dir ? &*run_dir : nullptr, o.timeline_given, o.timeline_path);
  if (o.engine != "local") relaunch_if_requested(o.np, o.engine, argc, argv, o.supervision);
  // A rank from here on. With checkpoints a preemption stops at a step and saves it.
  if (!config.train.checkpoint_dir.empty()) catch_preemption_signals();

  const auto data = train::load_task_data(config.data, config.train.seed);
  comm::CommOptions copts;
  copts.timeout = comm::Millis(static_cast<long long>(config.train.timeout_s * 1000));
  copts.stall_warn = comm::Millis(static_cast<long long>(config.train.stall_warn_s * 1000));
  run_on_ranks(o.engine, o.np, copts, [&](comm::Communicator& comm) {
    train_rank(config, o, comm, data, start, run_dir ? &*run_dir : nullptr);
  });
}

}  // namespace

void add_train_command(CLI::App& app, int argc, char** argv) {
  auto o = std::make_shared<TrainOptions>();
  if (const char* e = std::getenv(kEngineVar)) o->engine = e;
  auto* sub = app.add_subcommand("train", kTrainDescription);
  sub->add_option("--config", o->config_path,
                  "TOML file with [data] [model] [optim] [train] "
                  "[strategy] sections")
      ->required();
  sub->add_option("--set", o->sets,
                  "Override a config key: --set train.batch_size=128 (repeatable)");
  auto* np =
      sub->add_option("--np", o->np, "Ranks (relaunches under distml launch; threads for local)");
  sub->add_option("--engine", o->engine, "mpi | gloo | local");
  sub->add_option("--resume", o->resume,
                  "Continue exactly from the checkpoint in this directory (and keep saving there "
                  "unless train.checkpoint_dir says otherwise)");
  sub->add_flag("--json", o->json, "Metrics as JSON lines on stdout; the last is the done line");
  sub->add_option("--profile", o->profile_path,
                  "Write what `distml simulate` needs of this run (the step's phases, each "
                  "gradient's size and ready time) to FILE as JSON (docs/simulator.md)");
  auto* timeline = sub->add_option(
      "--timeline", o->timeline_path,
      "Write every rank's steps, communication, evaluations and checkpoints to this "
      "file as a Chrome-trace JSON (open it in ui.perfetto.dev)");
  timeline->expected(0, 1);  // with --run-dir, no FILE: DIR/timeline.json
  add_run_dir_option(*sub, o->run_dir);
  add_restart_options(*sub, o->supervision);
  sub->add_flag("--print-config", o->print_config,
                "Print every config key with its resolved value, its default and where it came "
                "from (the file, --set, or the default), then exit");
  sub->callback([o, np, timeline, argc, argv] {
    o->np_given = np->count() > 0;
    o->timeline_given = timeline->count() > 0;
    run(*o, argc, argv);
  });
}

}  // namespace distml::cli
