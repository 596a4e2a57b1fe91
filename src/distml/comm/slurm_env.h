// What Slurm tells a process through SLURM_* variables, and how a task that srun started finds
// its rank and its peers without mpirun: SLURM_PROCID is the rank, the step's task count the
// world size, and the first host of the step's node list serves the rendezvous.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace distml::comm {

/// Looks up an environment variable (nullptr when unset): std::getenv, or a table in tests.
using EnvLookup = std::function<const char*(const char*)>;
/// std::getenv as an EnvLookup.
const char* process_env(const char* name);

/// This process's allocation and, when srun started it, its task.
struct SlurmEnv {
  std::string job_id;    // SLURM_JOB_ID: empty outside an allocation
  std::string step_id;   // SLURM_STEP_ID: set only in the tasks srun starts, not in a batch script
  int ntasks = 0;        // SLURM_STEP_NUM_TASKS in a task, else SLURM_NTASKS; 0 when neither is set
  int procid = -1;       // SLURM_PROCID (a task's rank in its step)
  int localid = -1;      // SLURM_LOCALID (its index among the step's tasks on its node)
  std::string nodelist;  // SLURM_STEP_NODELIST in a task, else SLURM_JOB_NODELIST

  bool in_allocation() const { return !job_id.empty(); }
  bool in_srun_task() const { return !step_id.empty() && procid >= 0; }
};

/// Reads the SLURM_* variables. UsageError naming the variable when a number is not one.
SlurmEnv read_slurm_env(const EnvLookup& env = process_env);

/// Expands Slurm's hostlist syntax: "node[1-3,5],gpu[08-09]" -> node1 node2 node3 node5 gpu08
/// gpu09 (zero padding kept; several bracket groups in one name multiply out). UsageError
/// naming the list when a bracket or range is malformed.
std::vector<std::string> expand_hostlist(std::string_view hostlist);

/// The TCP port of a step's rendezvous, derived from its job and step IDs so that jobs and
/// steps that run at the same time on one host do not collide (MASTER_PORT overrides it).
int rendezvous_port(const SlurmEnv& slurm);

/// The variables the gloo engine reads (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR,
/// MASTER_PORT) for a task that srun started, leaving out those already set; none outside an
/// srun task or under mpirun, whose own variables say who a process is.
std::vector<std::pair<std::string, std::string>> slurm_rank_variables(
    const EnvLookup& env = process_env);

/// Sets slurm_rank_variables() in this process's environment.
void adopt_slurm_rank_variables();

/// Whether srun started this process without the PMIx server that Debian's OpenMPI needs to
/// start (srun --mpi=pmix), and not under mpirun: the mpi engine cannot start here.
bool srun_task_without_pmix(const EnvLookup& env = process_env);

/// UsageError naming --engine gloo and srun --mpi=pmix where srun_task_without_pmix(): MPI
/// would otherwise abort in MPI_Init with a message that names neither.
void check_mpi_can_start(const EnvLookup& env = process_env);

}  // namespace distml::comm
