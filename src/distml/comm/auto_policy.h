// Which algorithm `auto` runs, by engine, world size and message size. The thresholds come
// from `distml bench` runs on this project's machines; docs/benchmarks.md has the numbers.
#pragma once

#include <cstddef>
#include <string_view>

#include "distml/comm/types.h"

namespace distml::comm {

Algorithm auto_allreduce_algorithm(std::string_view engine, int world_size, std::size_t bytes);

}  // namespace distml::comm
