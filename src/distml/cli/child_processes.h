// The processes of a job, as the launcher runs them: started with a parent-death signal and a
// process group of their own, the signals from outside passed on to them, and when one fails
// the others stopped (politely first), with each one's output passed through or prefixed with
// its index (cli/launch.cc runs the ranks, or mpirun, through it).
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace distml::cli {

/// How a job's processes ended.
struct JobEnd {
  int code = 0;                     // the first failing process's exit code, or 0
  int failed = -1;                  // its index
  std::string cause;                // "rank 1 was killed by signal 9 (Killed)"
  bool cause_killed = false;        // ... killed by a signal from outside the launcher
  bool interrupted = false;         // a signal from outside was passed on to the processes
  bool preempted = false;           // ... one that a rank of distml train takes as a preemption
  bool asked_to_stop = false;       // the launcher's Watch asked them to checkpoint and stop
  std::string stderr_tail;          // with keep_stderr: the end of what they wrote to stderr
  std::vector<std::string> errors;  // the error lines they wrote, held back (job_output.h)
};

/// How long a process that reported its job's failure may take to end before it is stopped
/// (after what it wrote to stderr so far), or nullopt while it has reported none.
using TeardownGrace = std::function<std::optional<std::chrono::seconds>(const std::string&)>;

/// A process to start: its command, what to add to its environment, its name in messages, and
/// (with keep_stderr) how long it may take to end once its stderr says that its job has failed.
struct ChildSpec {
  std::vector<std::string> argv;
  std::vector<std::pair<std::string, std::string>> env;
  std::string name;
  TeardownGrace teardown_grace;
  // mpirun ends the job on SIGTERM, killing the ranks a moment later, but passes SIGUSR1 on:
  // sent that instead, so that distml's ranks can checkpoint (core/preemption.h).
  bool preempt_with_usr1 = false;
  // Its standard input is a pipe for the launcher's orders (cli/launcher_orders.h), which the
  // launcher holds open while it runs.
  bool orders_on_stdin = false;
};

/// Called about every 100 ms while the processes run: true asks them, once, to checkpoint and
/// stop (the order kCheckpointOrder on their standard input: cli/launcher_orders.h), as the
/// launcher does to take in a new host (JobEnd::asked_to_stop).
using Watch = std::function<bool()>;

/// Starts the processes, passes SIGINT, SIGTERM, SIGHUP, SIGUSR1 and SIGUSR2 on to them, and
/// when one fails stops the others. Their output passes through pipes, stderr tidied
/// (job_output.h: error lines into JobEnd::errors, mpirun's report and the launcher's notes on
/// stopping them into the launch log). With `prefix_output` each output line is prefixed with
/// the process's index (its rank); with `keep_stderr` the end of each one's stderr is kept in
/// JobEnd::stderr_tail (for mpirun's account of which rank failed).
JobEnd run_children(const std::vector<ChildSpec>& specs, bool prefix_output, bool keep_stderr,
                    const Watch& watch = {});

}  // namespace distml::cli
