#include "slurm.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <regex>

#include "distml/core/error.h"
#include "distml/core/parse.h"

namespace distml::cli {
namespace {

bool srun_on_path() {
  const char* path = std::getenv("PATH");
  if (!path) return false;
  for (const auto& dir : split_list(path, ':'))
    if (::access((std::filesystem::path(dir) / "srun").c_str(), X_OK) == 0) return true;
  return false;
}

}  // namespace

bool launches_with_srun(const LaunchOptions& o, const comm::SlurmEnv& slurm) {
  return slurm.in_allocation() && o.hosts.empty() && o.hostfile.empty() && o.netns_cluster.empty();
}

std::vector<std::string> srun_command(const LaunchOptions& o, const comm::SlurmEnv& slurm) {
  if (slurm.in_srun_task() && slurm.ntasks > 1)
    throw UsageError(cat("distml launch: this process is task ", slurm.procid, " of ", slurm.ntasks,
                         " that srun started (step ", slurm.job_id, ".", slurm.step_id,
                         "); each task is a rank already: run the command under ",
                         "srun itself, without distml launch or --np"));
  const int np = o.np > 0 ? o.np : slurm.ntasks;
  if (np < 1)
    throw UsageError(cat("distml launch: job ", slurm.job_id, " has no task count (SLURM_NTASKS ",
                         "is unset: salloc/sbatch without -n); give -n N"));
  // --kill-on-bad-exit: a rank that fails ends the step, as mpirun and the local launcher do;
  // the others would otherwise wait in a collective until their timeout.
  std::vector<std::string> argv{"srun",
                                "--ntasks",
                                std::to_string(np),
                                "--kill-on-bad-exit=1",
                                "--mpi",
                                o.engine == "mpi" ? "pmix" : "none"};
  if (o.prefix_output) argv.push_back("--label");  // "0: line" rather than "[0] line"
  argv.insert(argv.end(), o.command.begin(), o.command.end());
  return argv;
}

std::optional<SrunFailure> srun_failure(const std::string& stderr_tail) {
  static const std::regex failed(R"(srun: error: (\S+): tasks? ([0-9]+)[^:]*: ([^\n]*))");
  static const std::regex exited(R"(Exited with exit code ([0-9]+))");
  std::smatch m, code;
  if (!std::regex_search(stderr_tail, m, failed)) return std::nullopt;
  const std::string how = m[3].str(), rank = cat("rank ", m[2].str(), " on ", m[1].str(), " ");
  if (std::regex_search(how, code, exited))
    return SrunFailure{cat(rank, "exited with code ", code[1].str()), std::stoi(code[1].str())};
  return SrunFailure{cat(rank, "ended: ", how), std::nullopt};
}

JobEnd run_srun(const LaunchOptions& o, const comm::SlurmEnv& slurm) {
  auto argv = srun_command(o, slurm);
  if (!srun_on_path())
    throw UsageError(cat("distml launch: inside Slurm job ", slurm.job_id, " (SLURM_JOB_ID) the ",
                         "ranks start with srun, which is not on PATH (Debian package ",
                         "slurm-client); or give --hosts/--hostfile to start them with mpirun"));
  // srun passes the whole environment on (--export=ALL is its default): the ranks learn that
  // they were launched, their engine, and whether output goes to a terminal. It passes SIGTERM
  // and SIGUSR1 on to the tasks, and with --kill-on-bad-exit ends them all when one fails.
  ::setenv(kLaunchedVar, "1", 1);
  ::setenv(kEngineVar, o.engine.c_str(), 1);
  JobEnd end = run_children({{argv, {}, "srun", {}, false}}, false, true);
  if (auto failure = srun_failure(end.stderr_tail)) {
    // srun's own exit code (above 128 when it killed the other tasks) is not the cause.
    end.cause = std::move(failure->cause);
    end.cause_killed = !failure->code;
    if (failure->code) end.code = *failure->code;
  }
  return end;
}

void default_to_gloo_under_srun() {
  try {
    if (std::getenv(kEngineVar) || !comm::srun_task_without_pmix()) return;
  } catch (const UsageError&) {
    return;  // a malformed SLURM_* variable: reported where the ranks read them
  }
  ::setenv(kEngineVar, "gloo", 1);
  if (comm::read_slurm_env().procid == 0)
    std::fprintf(stderr,
                 "distml: srun started the ranks without PMIx (srun --mpi=pmix), which the mpi "
                 "engine needs: they meet over gloo\n");
}

}  // namespace distml::cli
