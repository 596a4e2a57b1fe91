// Engine selection by name at run time: the one place that knows every engine.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "distml/comm/communicator.h"

namespace distml::comm {

/// Where a process finds its peers. mpi: from mpirun. gloo: RANK, WORLD_SIZE and either
/// `file_store` or MASTER_ADDR/MASTER_PORT from the environment.
struct ConnectOptions {
  std::string engine = "mpi";
  std::string file_store;  // gloo only: rendezvous through this file instead of TCPStore
};

/// All engine names, for error messages and --help.
std::vector<std::string_view> engine_names();
/// Throws UsageError listing the valid names when `name` is not an engine.
void check_engine_name(std::string_view name);

/// Connects this process to its world and runs the start-up handshake. UsageError when the
/// world it joined is not the one its launcher started: WORLD_SIZE (set by `distml launch
/// --engine gloo`) or OMPI_COMM_WORLD_SIZE (set by mpirun) names another size, as when a
/// process started for gloo connects over mpi alone.
std::unique_ptr<Communicator> connect(const ConnectOptions& where, const CommOptions& options);

/// Connects with the engine and ranks that `distml launch` set (DISTML_ENGINE, default mpi, or
/// gloo in a task that srun started without PMIx; for gloo under mpirun or srun, the ranks they
/// gave: slurm_env.h). What a program of one's own calls. UsageError
/// for DISTML_ENGINE=local (its ranks are threads: comm::local::run_ranks) or an unknown name.
std::unique_ptr<Communicator> connect(const CommOptions& options = {});

/// Under mpirun, sets RANK and WORLD_SIZE from OpenMPI's variables when they are unset, so
/// that the gloo engine can run in processes that mpirun started.
void adopt_mpirun_rank_variables();

}  // namespace distml::comm
