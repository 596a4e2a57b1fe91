#include "report.h"

#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>

#include "distml/core/atomic_file.h"
#include "report_charts.h"
#include "report_page.h"
#include "run_record.h"

namespace distml::cli {
namespace {

struct ReportOptions {
  std::vector<std::string> dirs;
  std::string out = "report.html";
};

void run(const ReportOptions& o) {
  const PlotScripts scripts = load_plot_scripts();  // before the work: it may be missing
  std::vector<RunRecord> runs;
  for (const std::string& dir : o.dirs) runs.push_back(read_run_dir(dir));
  name_runs(runs);
  const auto charts = report_charts(runs);
  write_file_atomically(o.out, {report_page(runs, charts, scripts)});
  std::printf("distml report: %zu run%s, %zu plots: %s\n", runs.size(), runs.size() == 1 ? "" : "s",
              charts.size(), o.out.c_str());
}

}  // namespace

void add_report_command(CLI::App& app) {
  auto o = std::make_shared<ReportOptions>();
  auto* sub = app.add_subcommand(
      "report",
      "One self-contained HTML page from run directories (--run-dir of train, rl, fit): loss, "
      "accuracy or return against steps and wall time, throughput, communication and its "
      "hidden share, bytes per step, time per rank from the timeline, and with several runs "
      "the same plots overlaid and a table of their done lines; see docs/operations.md.\n"
      "Example: distml report runs/allreduce runs/local_sgd --out strategies.html");
  sub->add_option("dirs", o->dirs, "Run directories")->required();
  sub->add_option("--out", o->out, "The page to write (default report.html)");
  sub->callback([o] { run(*o); });
}

}  // namespace distml::cli
