// `distml report DIR [DIR...] --out report.html`: one self-contained page of plots and a
// comparison table from run directories (run_dir.h).
#pragma once

namespace CLI {
class App;
}

namespace distml::cli {

void add_report_command(CLI::App& app);

}  // namespace distml::cli
