// An OpenMPI hostfile, as distml launch reads it: a host per line, `NAME [slots=N]
// [max_slots=M]`, '#' starting a comment. mpirun reads it itself for the mpi engine; the gloo
// engine's ranks, which distml launch starts itself, go where it says, and meet at its first
// host.
#pragma once

#include <string>
#include <vector>

#include "host_discovery.h"

namespace distml::cli {

/// The hosts of `hostfile` in order, each with its slots (1 where not given; a host named on
/// several lines has the sum). UsageError naming the file and line where it cannot be read,
/// names no host, or a line is not `NAME [slots=N] [max_slots=M]` with counts >= 1.
std::vector<HostSlots> read_hostfile(const std::string& hostfile);

}  // namespace distml::cli
