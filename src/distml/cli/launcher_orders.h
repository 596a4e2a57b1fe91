// Orders from distml launch to the ranks it starts itself on hosts (gloo on --hosts,
// --hostfile, --netns-cluster): a line each on the rank's standard input, which a remote shell
// passes on where it passes no signal (cli/remote_shell.h).
//   "checkpoint": checkpoint at a step the ranks agree on and exit 75, as a preemption does
//                 (core/preemption.h); the launcher then starts them again on a larger world.
// The end of the input means the launcher is gone (killed outright, its host lost): the rank
// ends too, so that no rank trains on into the job's checkpoint folder; a parent-death signal
// cannot reach across a remote shell.
#pragma once

#include <string_view>

namespace distml::cli {

/// Set to "stdin" in the environment of a rank that takes orders on its standard input.
inline constexpr const char* kOrdersVar = "DISTML_ORDERS";
inline constexpr std::string_view kCheckpointOrder = "checkpoint\n";

/// Where kOrdersVar asks for it, reads the orders on a thread of their own for the rest of the
/// process's life.
void follow_launcher_orders();

}  // namespace distml::cli
