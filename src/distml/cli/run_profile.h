// `distml profile RUN_DIR --out FILE`: the profile `distml train --profile` writes
// (sim/profile.h), from a run that kept its timeline (distml train --run-dir RUN_DIR
// --timeline) instead: the step's phases from rank 0's "main" lane in RUN_DIR/timeline.json,
// the world size and engine from RUN_DIR/done.json, and the model's layers, measured on this
// machine, from RUN_DIR/config.toml. docs/simulator.md, "The profile".
#pragma once

namespace CLI {
class App;
}

namespace distml::cli {

void add_profile_command(CLI::App& app);

}  // namespace distml::cli
