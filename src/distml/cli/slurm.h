// `distml launch` inside a Slurm allocation (salloc, sbatch): srun starts the ranks, as many
// as the allocation has tasks unless -n says otherwise, and each task finds its rank from
// SLURM_* (comm/slurm_env.h). Also the engine a task takes when srun started it directly.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "child_processes.h"
#include "distml/comm/slurm_env.h"
#include "launch.h"

namespace distml::cli {

/// Whether `o` runs under srun: inside an allocation, with no hosts of its own (--hosts,
/// --hostfile, --netns-cluster, which keep mpirun and the emulated cluster).
bool launches_with_srun(const LaunchOptions& o, const comm::SlurmEnv& slurm);

/// The srun command line for `o`: -n from o.np, else the allocation's task count; the
/// mpi engine's ranks get PMIx (--mpi=pmix), which Debian's OpenMPI starts from. UsageError
/// when the count is unknown, or when this process is itself one of several srun tasks (each
/// is a rank already: a nested srun would start N x N).
std::vector<std::string> srun_command(const LaunchOptions& o, const comm::SlurmEnv& slurm);

/// Runs `o`'s ranks under srun, as a child whose standard error is tidied as mpirun's is
/// (job_output.h: the ranks' error lines held back for the job's last line, srun's own report
/// to the launch log), and returns how it ended, the failing task named where srun said which.
/// UsageError where srun is missing, and srun_command's.
JobEnd run_srun(const LaunchOptions& o, const comm::SlurmEnv& slurm);

/// The first failed task in srun's report ("srun: error: NODE: task 1: Exited with exit code
/// 2"): cause "rank 1 on NODE exited with code 2" and that code, which is the job's (srun's own
/// is the highest of its tasks', those it killed after the failure included); nullopt when the
/// report names none.
struct SrunFailure {
  std::string cause;
  std::optional<int> code;  // none where the task ended by a signal
};
std::optional<SrunFailure> srun_failure(const std::string& stderr_tail);

/// In a task that srun started without PMIx and with no engine chosen (DISTML_ENGINE unset):
/// sets DISTML_ENGINE=gloo, the engine that can meet there, and says so on task 0's stderr.
/// Call before the subcommands read their default engine.
void default_to_gloo_under_srun();

}  // namespace distml::cli
