// Which algorithm `auto` runs, by engine, world size and message size. The thresholds come
// from `distml bench` runs on this project's machines; docs/benchmarks.md has the numbers.
#pragma once

#include <cstddef>
#include <string_view>

#include "distml/comm/types.h"

namespace distml::comm {

/// `hosts` and `ranks_per_host` as the start-up handshake found them (ranks_per_host 0: hosts
/// hold different numbers of ranks).
Algorithm auto_allreduce_algorithm(std::string_view engine, int world_size, std::size_t bytes,
                                   int hosts = 1, int ranks_per_host = 0);

}  // namespace distml::comm
