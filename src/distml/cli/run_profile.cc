#include "run_profile.h"

#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "distml/core/error.h"
#include "distml/train/config.h"
#include "distml/train/task_data.h"
#include "run_dir.h"
#include "run_record.h"
#include "torch_commands.h"
#include "train_profile.h"

namespace distml::cli {
namespace {

struct ProfileOptions {
  std::string run_dir, out;
};

void run(const ProfileOptions& o) {
  const std::filesystem::path dir(o.run_dir);
  const auto config = train::load_config((dir / kRunConfigFile).string());
  if (config.parallel.pipeline_stages > 1 || config.parallel.tensor > 1)
    throw UsageError(cat(o.run_dir,
                         ": a profile is of a data-parallel step; a pipeline or tensor-parallel "
                         "run is measured by distml plan"));
  const auto done = parse_json_file(dir / kRunDoneFile);
  if (!done.contains("np") || !done["np"].is_number_integer() || !done.contains("engine") ||
      !done["engine"].is_string())
    throw DataError(cat((dir / kRunDoneFile).string(),
                        ": expected a train run's done line with \"np\" and \"engine\""));
  const std::string trace_path = (dir / kRunTimelineFile).string();
  const auto trace = parse_json_file(trace_path);
  Timeline timeline(0);
  std::deque<std::string> names;
  replay_main_lane(trace, trace_path, timeline, names);
  const auto data = train::load_task_data(config.data, config.train.seed);
  const auto profile = measure_profile(timeline, config, data, done["np"].get<int>(),
                                       done["engine"].get<std::string>());
  if (profile.steps == 0)
    throw DataError(cat(trace_path, ": no \"step\" span on rank 0's main lane"));
  sim::write_profile(profile, o.out);
  std::printf("%s: %lld steps of %s, %d ranks over %s, median step %.4f s\n", o.out.c_str(),
              static_cast<long long>(profile.steps), profile.model.c_str(), profile.world,
              profile.engine.c_str(), profile.step_s);
}

}  // namespace

void add_profile_command(CLI::App& app) {
  auto o = std::make_shared<ProfileOptions>();
  auto* sub = app.add_subcommand("profile", kProfileDescription);
  sub->add_option("run_dir", o->run_dir, "A run directory of distml train --run-dir DIR --timeline")
      ->required();
  sub->add_option("--out", o->out, "Where to write the profile (JSON)")->required();
  sub->callback([o] { run(*o); });
}

}  // namespace distml::cli
