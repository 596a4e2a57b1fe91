#include "plan.h"

#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "distml/comm/engines.h"
#include "distml/core/error.h"
#include "distml/core/parse.h"
#include "distml/train/plan.h"
#include "distml/train/trainer.h"
#include "launch.h"
#include "torch_commands.h"

namespace distml::cli {
namespace {

struct PlanCliOptions {
  std::string config_path;
  std::vector<std::string> sets;
  int np = 0;
  std::string engine = "mpi";
  std::vector<int> stages;
  std::string micro_batches;  // "", "auto" or a comma-separated list
  double latency_us = -1, bandwidth_mbps = -1;
  int reps = 5;
  bool measure = false;
  int measure_steps = 30;
  bool json = false;
  std::string search = "dp";
};

std::vector<int> micro_batch_candidates(const std::string& text, std::int64_t batch) {
  std::vector<int> out;
  if (text.empty()) return out;
  if (text == "auto") {
    for (int m = 1; m <= std::min<std::int64_t>(batch, 32); m *= 2) out.push_back(m);
    return out;
  }
  for (const auto& item : split_list(text)) {
    int m = 0;
    if (std::sscanf(item.c_str(), "%d", &m) != 1 || m < 1 || cat(m) != item)
      throw UsageError(
          cat("--micro-batches: expected \"auto\" or counts >= 1 like 4,8, got \"", text, "\""));
    out.push_back(m);
  }
  return out;
}

std::string counts_text(const std::vector<int>& counts) {
  std::string s = "[";
  for (std::size_t i = 0; i < counts.size(); ++i) s += cat(i ? ", " : "", counts[i]);
  return s + "]";
}

nlohmann::json grid_json(const train::GridPlan& g) {
  return {{"stages", g.stages},
          {"replicas", g.replicas},
          {"micro_batches", g.micro_batches},
          {"partition", g.counts},
          {"search", g.search},
          {"predicted_step_s", g.step_s},
          {"predicted_samples_per_s", g.samples_per_s}};
}

void print_text(const train::Plan& plan, const PlanCliOptions& o) {
  std::printf("layers, per micro-batch of the chosen plan (%s):\n",
              counted(plan.best.micro_batches, "micro-batch", "micro-batches").c_str());
  std::printf("  %-14s %10s %10s %12s %12s\n", "layer", "fwd ms", "bwd ms", "output KiB",
              "params KiB");
  for (std::size_t i = 0; i < plan.layers.size(); ++i) {
    const auto& l = plan.layers[i];
    std::printf("  %-14s %10.3f %10.3f %12.1f %12.1f\n", plan.layer_names[i].c_str(),
                1e3 * l.forward_s, 1e3 * l.backward_s, l.output_bytes / 1024,
                l.parameter_bytes / 1024);
  }
  std::printf("cores per rank (its host's cores / its ranks): %.2f; sharing efficiency %.2f\n",
              plan.cores_per_rank, plan.sharing_efficiency);
  std::printf("link: latency %.1f us, bandwidth %.2f GB/s (%s)\n", 1e6 * plan.link.latency_s,
              plan.link.bytes_per_s / 1e9,
              plan.link_measured ? "measured between ranks 0 and 1" : "given");
  if (plan.slow_rank >= 0)
    std::printf("rank %d computes %.2f times slower (train.slow_rank, train.slow_factor)\n",
                plan.slow_rank, plan.slow_factor);
  std::printf("  %6s %8s %6s %-20s %6s %14s %12s\n", "stages", "replicas", "micro", "partition",
              "search", "predicted step", "samples/s");
  for (const auto& g : plan.candidates)
    std::printf("  %6d %8d %6d %-20s %6s %12.4f s %12.0f\n", g.stages, g.replicas, g.micro_batches,
                counts_text(g.counts).c_str(), g.search.c_str(), g.step_s, g.samples_per_s);
  std::string command =
      cat("distml train --config ", o.config_path, " --np ", plan.best.stages * plan.best.replicas);
  auto sets = o.sets;
  for (const auto& s : train::plan_overrides(plan.best)) sets.push_back(s);
  for (const auto& s : sets)  // quoted for the shell where it needs it
    command += s.find_first_of("[]\" '*?$") == std::string::npos ? cat(" --set ", s)
                                                                 : cat(" --set '", s, "'");
  std::printf(
      "chosen: %s x %s, %s, partition %s: %.4f s per step\n"
      "run it: %s\n",
      counted(plan.best.stages, "stage").c_str(), counted(plan.best.replicas, "replica").c_str(),
      counted(plan.best.micro_batches, "micro-batch", "micro-batches").c_str(),
      counts_text(plan.best.counts).c_str(), plan.best.step_s, command.c_str());
  std::fflush(stdout);
}

// Every rank: the plan, then (--measure) a short run of it; rank 0 reports.
void plan_rank(const PlanCliOptions& o, const train::TrainConfig& config,
               const train::TaskData& data, comm::Communicator& world) {
  train::PlanOptions options;
  options.stages = o.stages;
  options.micro_batches = micro_batch_candidates(o.micro_batches, config.train.batch_size);
  if (o.latency_us >= 0)
    options.link = train::pipeline::Link{o.latency_us * 1e-6, o.bandwidth_mbps * 125e3};
  options.reps = o.reps;
  options.search = o.search;
  const auto plan = train::make_plan(config, data, world, options);
  nlohmann::json done = {{"event", "done"}, {"chosen", grid_json(plan.best)}};
  if (world.rank() == 0) {
    if (o.json) {
      nlohmann::json candidates = nlohmann::json::array();
      for (const auto& g : plan.candidates) candidates.push_back(grid_json(g));
      std::cout << nlohmann::json{{"event", "plan"},
                                  {"link_latency_s", plan.link.latency_s},
                                  {"link_bytes_per_s", plan.link.bytes_per_s},
                                  {"link_measured", plan.link_measured},
                                  {"slow_rank", plan.slow_rank},
                                  {"slow_factor", plan.slow_factor},
                                  {"cores_per_rank", plan.cores_per_rank},
                                  {"sharing_efficiency", plan.sharing_efficiency},
                                  {"candidates", candidates}}
                       .dump()
                << std::endl;
    } else {
      print_text(plan, o);
    }
  }
  if (o.measure) {
    auto sets = o.sets;
    for (const auto& s : train::plan_overrides(plan.best)) sets.push_back(s);
    sets.push_back(cat("train.max_steps=", o.measure_steps));
    sets.push_back("train.checkpoint_dir=\"\"");
    const auto run_config = train::load_config(o.config_path, sets);
    train::Trainer trainer(run_config, world, data);
    const auto result = trainer.run({}, {});
    const double measured = 1 / result.steps_per_sec;
    done["measured_step_s"] = measured;
    done["prediction_error"] = (plan.best.step_s - measured) / measured;
    if (world.rank() == 0 && !o.json)
      std::printf("measured over %d steps: %.4f s per step; predicted %.4f s (%+.1f%%)\n",
                  o.measure_steps, measured, plan.best.step_s,
                  100 * (plan.best.step_s - measured) / measured);
  }
  if (world.rank() == 0 && o.json) std::cout << done.dump() << std::endl;
}

void run(const PlanCliOptions& o, bool np_given, int argc, char** argv) {
  if (np_given && o.np < 1) throw UsageError(cat("--np must be at least 1, got ", o.np));
  if ((o.latency_us >= 0) != (o.bandwidth_mbps > 0))
    throw UsageError(
        "--latency-us and --bandwidth-mbps go together (bandwidth > 0); leave both "
        "out to measure the link");
  comm::check_engine_name(o.engine);
  const auto config = train::load_config(o.config_path, o.sets);
  micro_batch_candidates(o.micro_batches, config.train.batch_size);  // a UsageError before launch
  if (o.engine != "local") relaunch_if_requested(o.np, o.engine, argc, argv);
  const auto data = train::load_task_data(config.data, config.train.seed);
  comm::CommOptions copts;
  copts.timeout = comm::Millis(static_cast<long long>(config.train.timeout_s * 1000));
  run_on_ranks(o.engine, o.np, copts,
               [&](comm::Communicator& comm) { plan_rank(o, config, data, comm); });
}

}  // namespace

void add_plan_command(CLI::App& app, int argc, char** argv) {
  auto o = std::make_shared<PlanCliOptions>();
  if (const char* e = std::getenv(kEngineVar)) o->engine = e;
  auto* sub = app.add_subcommand("plan", kPlanDescription);
  sub->add_option("--config", o->config_path, "TOML file, as for distml train")->required();
  sub->add_option("--set", o->sets, "Override a config key, as for distml train (repeatable)");
  auto* np = sub->add_option("--np", o->np, "Ranks to plan for (and to measure with)");
  sub->add_option("--engine", o->engine, "mpi | gloo | local");
  sub->add_option("--stages", o->stages,
                  "Pipeline stage counts to consider, e.g. --stages 2 4 (default: every "
                  "divisor of --np)")
      ->check(CLI::PositiveNumber);
  sub->add_option("--micro-batches", o->micro_batches,
                  "Micro-batch counts to consider: 4,8 or auto (1, 2, 4 ... up to 32); default: "
                  "parallel.micro_batches");
  sub->add_option("--latency-us", o->latency_us, "The link's latency, instead of measuring it")
      ->check(CLI::NonNegativeNumber);
  sub->add_option("--bandwidth-mbps", o->bandwidth_mbps,
                  "The link's bandwidth in Mbit/s, instead of measuring it")
      ->check(CLI::PositiveNumber);
  sub->add_option("--reps", o->reps, "Timed passes per layer measurement (median)")
      ->check(CLI::PositiveNumber);
  sub->add_flag("--measure", o->measure,
                "Then train the chosen plan for --measure-steps steps and report the measured "
                "step time beside the predicted one");
  sub->add_option("--measure-steps", o->measure_steps, "Steps of the --measure run")
      ->check(CLI::PositiveNumber);
  sub->add_option("--search", o->search,
                  "How partitions are found: dp (dynamic programming over cut points, exact for "
                  "equal ranks) or rl (also a placement learnt by REINFORCE with the simulated "
                  "step as reward, which accounts for train.slow_rank)")
      ->check(CLI::IsMember({"dp", "rl"}));
  sub->add_flag("--json", o->json, "A plan line and a done line as JSON on stdout");
  sub->callback([o, np, argc, argv] { run(*o, np->count() > 0, argc, argv); });
}

}  // namespace distml::cli
