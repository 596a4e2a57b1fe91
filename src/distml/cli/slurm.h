// `distml launch` inside a Slurm allocation (salloc, sbatch): srun starts the ranks, as many
// as the allocation has tasks unless -n says otherwise, and each task finds its rank from
// SLURM_* (comm/slurm_env.h). Also the engine a task takes when srun started it directly.
#pragma once

#include <string>
#include <vector>

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

/// Starts `o`'s ranks with srun in place of this process (which srun's exit code then ends);
/// returns only by throwing (srun missing, srun_command's errors).
int launch_with_srun(const LaunchOptions& o, const comm::SlurmEnv& slurm);

/// In a task that srun started without PMIx and with no engine chosen (DISTML_ENGINE unset):
/// sets DISTML_ENGINE=gloo, the engine that can meet there, and says so on task 0's stderr.
/// Call before the subcommands read their default engine.
void default_to_gloo_under_srun();

}  // namespace distml::cli
