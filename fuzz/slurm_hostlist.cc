// Fuzzes Slurm's host list syntax (comm/slurm_env.cc), which a task srun started reads from
// SLURM_JOB_NODELIST ("node[1-3,5],gpu[08-09]"): a list expands to at most kMaxHosts names,
// none of which holds a bracket or a comma left over, or is refused with a UsageError.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "distml/comm/slurm_env.h"
#include "distml/core/error.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view list(reinterpret_cast<const char*>(data), size);
  try {
    for (const auto& host : distml::comm::expand_hostlist(list))
      if (host.find_first_of("[],") != std::string::npos) std::abort();
  } catch (const distml::UsageError&) {
  }
  return 0;
}
