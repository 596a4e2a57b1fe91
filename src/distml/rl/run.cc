#include "distml/rl/run.h"

#include <mutex>

#include "distml/comm/engines.h"
#include "distml/comm/local/local_world.h"

namespace distml::rl {

RunResult run(const RlConfig& config, const RunOptions& options) {
  comm::check_engine_name(options.engine);
  comm::CommOptions copts;
  copts.timeout = comm::Millis(static_cast<long long>(config.run.timeout_s * 1000));
  copts.fingerprint = fingerprint(config);
  if (options.engine != "local") {
    auto comm = comm::connect({options.engine, ""}, copts);
    return run_algorithm(config, *comm, options.hooks);
  }
  RunResult lead;
  std::mutex mutex;
  comm::local::run_ranks(options.np, copts, [&](comm::Communicator& comm) {
    RunResult r = run_algorithm(config, comm, options.hooks);
    std::lock_guard lock(mutex);
    if (comm.rank() == 0) lead = std::move(r);
  });
  return lead;
}

}  // namespace distml::rl
