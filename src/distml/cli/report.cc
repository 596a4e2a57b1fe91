#include "report.h"

#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>

#include "distml/core/atomic_file.h"
#include "distml/core/error.h"
#include "distml/core/parse.h"
#include "report_charts.h"
#include "report_page.h"
#include "report_scaling.h"
#include "run_record.h"

namespace distml::cli {
namespace {

struct ReportOptions {
  std::vector<std::string> dirs, predictions;
  std::string out = "report.html";
  bool json = false;
};

void run(const ReportOptions& o) {
  if (o.dirs.empty() && o.predictions.empty())
    throw UsageError("distml report: give run directories, --predictions files, or both");
  const PlotScripts scripts = load_plot_scripts();  // before the work: it may be missing
  check_writable_file(o.out, "--out");
  std::vector<RunRecord> runs;
  for (const std::string& dir : o.dirs) runs.push_back(read_run_dir(dir));
  name_runs(runs);
  std::vector<Predictions> predicted;
  for (const std::string& path : o.predictions) predicted.push_back(read_predictions(path));
  auto charts = report_charts(runs);
  add_scaling(charts, runs, predicted);
  write_file_atomically(o.out, {report_page(runs, charts, scripts)});
  if (o.json)
    std::printf(
        "%s\n",
        nlohmann::json(
            {{"event", "done"}, {"runs", runs.size()}, {"plots", charts.size()}, {"out", o.out}})
            .dump()
            .c_str());
  else
    std::printf("distml report: %s, %s: %s\n", counted(runs.size(), "run").c_str(),
                counted(charts.size(), "plot").c_str(), o.out.c_str());
}

}  // namespace

void add_report_command(CLI::App& app) {
  auto o = std::make_shared<ReportOptions>();
  auto* sub = app.add_subcommand(
      "report",
      "One self-contained HTML page from run directories (--run-dir of train, rl, fit): loss, "
      "accuracy or return against steps and wall time, throughput, communication and its "
      "hidden share, bytes per step, time per rank from the timeline, and with several runs "
      "the same plots overlaid and a table of their done lines; with --predictions, the "
      "scaling that distml simulate predicted, the runs' measured steps on the same axes; see "
      "docs/operations.md and docs/simulator.md.\n"
      "Example: distml report runs/allreduce runs/local_sgd --out strategies.html");
  sub->add_option("dirs", o->dirs, "Run directories");
  sub->add_option("--predictions", o->predictions,
                  "Files of distml simulate --json, one line per file in the scaling plot");
  sub->add_option("--out", o->out, "The page to write (default report.html)");
  sub->add_flag("--json", o->json, "Print the result as one JSON done line");
  sub->callback([o] { run(*o); });
}

}  // namespace distml::cli
