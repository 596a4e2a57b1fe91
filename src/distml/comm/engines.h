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

/// Connects this process to its world and runs the start-up handshake.
std::unique_ptr<Communicator> connect(const ConnectOptions& where, const CommOptions& options);

}  // namespace distml::comm
