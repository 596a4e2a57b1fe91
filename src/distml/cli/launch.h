// `distml launch`: starts N copies of a command as the ranks of one job, under mpirun for
// the mpi engine, or itself for the gloo engine (as processes with rendezvous variables, on
// other hosts through a remote shell), on this machine, on real hosts, or on hosts emulated in
// network namespaces.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "distml/comm/communicator.h"

namespace CLI {
class App;
}

namespace distml::cli {

/// The remote shell that starts the gloo engine's ranks on other hosts; BatchMode: fail
/// rather than ask for a password that nobody will type.
inline constexpr const char* kDefaultRsh = "ssh -o BatchMode=yes";

struct LaunchOptions {
  int np = 0;                      // 0: unset (an error, unless netns_cluster implies it)
  std::string hosts;               // "h1:2,h2:2"
  std::string hostfile;            // an OpenMPI hostfile
  std::string netns_cluster;       // "HxR": emulated hosts in network namespaces (netns_cluster.h)
  std::string bandwidth, latency;  // their links' shaping
  std::string engine = "mpi";
  bool prefix_output = false;     // prefix every output line with the rank
  int max_restarts = -1;          // restarts after a failure (-1: unset, 0 unless min_np is set)
  int min_np = 0;                 // > 0: a lost rank is not replaced while this many remain (gloo)
  int max_np = 0;                 // > 0: a world that grows stays within this many ranks
  std::string host_discovery;     // a script listing the hosts available (host_discovery.h)
  std::string rsh = kDefaultRsh;  // starts gloo's ranks on other hosts (remote_shell.h)
  double restart_window_s = 0;    // > 0: only the restarts of the last this many seconds count
  std::vector<std::string> command;
};

/// Set in the environment of every launched rank, so that `--np` does not relaunch again.
inline constexpr const char* kLaunchedVar = "DISTML_LAUNCHED";
/// The engine a launched rank should connect with.
inline constexpr const char* kEngineVar = "DISTML_ENGINE";
/// Whether the launcher's stdout is a terminal ("1" or "0"): mpirun gives ranks a
/// pseudo-terminal even when its own output goes to a pipe.
inline constexpr const char* kStdoutTtyVar = "DISTML_STDOUT_IS_TTY";

/// How many times the launcher has restarted the job ("0" on its first start).
inline constexpr const char* kRestartsVar = "DISTML_RESTARTS";
/// The launcher's restart policy, for the ranks to check and follow as if given their own
/// --max-restarts and --min-np.
inline constexpr const char* kMaxRestartsVar = "DISTML_MAX_RESTARTS";
inline constexpr const char* kMinNpVar = "DISTML_MIN_NP";

/// The restarts so far of the job this process belongs to (0 when not launched).
int restarts_so_far();

/// Whether this process's output ends up on a terminal (asks the launcher when launched).
bool stdout_is_terminal();

/// The mpirun argument vector for `o` (mpirun first, then the command). `cores` is the number
/// of slots available, `as_root` adds the run-as-root variables.
std::vector<std::string> mpirun_command(const LaunchOptions& o, int cores, bool as_root);

/// Runs the job; returns the exit code of the first rank that failed, or 0.
int launch(const LaunchOptions& o);

/// Adds the `launch` subcommand to `app`; its callback runs the job and exits.
void add_launch_command(CLI::App& app);

/// A TCP port on 127.0.0.1 that nothing listens on right now.
int free_port();

/// Adds --max-restarts (and, where the command can shrink, --min-np) to a command that
/// launches ranks, filling `o`.
void add_restart_options(CLI::App& command, LaunchOptions& o, bool elastic = true);

/// Where a command writes its checkpoints: `section`.checkpoint_dir and .checkpoint_every.
struct CheckpointKeys {
  const char* section;  // "train" or "run"
  const std::string& dir;
  std::int64_t every;
};

/// In a launched rank, the launcher's restart policy (kMaxRestartsVar, kMinNpVar) where the
/// command line gave none.
void adopt_launcher_policy(LaunchOptions& s);

/// UsageError when the restart options in `s` cannot work: on the local engine (its ranks are
/// threads), without a checkpoint folder to resume from, with checkpoints only at the end
/// (every restart would start over), or without --np outside a launched job (nothing would
/// start the ranks again).
void check_restart_options(const LaunchOptions& s, const std::string& engine, bool np_given,
                           const CheckpointKeys& checkpoints);

/// If `np` > 0 and this process was not itself launched, re-runs the current command line
/// (minus --np) under `distml launch -n np --engine engine` with the restart options of
/// `supervision`, and exits with its code.
void relaunch_if_requested(int np, const std::string& engine, int argc, char** argv,
                           const LaunchOptions& supervision = {});

/// Runs `body` on this process's ranks: `np` threads for the local engine; otherwise this
/// process's one rank, connected over `engine` (under mpirun or distml launch).
void run_on_ranks(const std::string& engine, int np, const comm::CommOptions& options,
                  const std::function<void(comm::Communicator&)>& body);

}  // namespace distml::cli
