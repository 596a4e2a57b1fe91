#include "distml/comm/engines.h"

#include "distml/comm/engine.h"
#include "distml/comm/gloo/gloo_connect.h"
#include "distml/comm/mpi/mpi_connect.h"

namespace distml::comm {

std::vector<std::string_view> engine_names() { return {"mpi", "gloo", "local"}; }

void check_engine_name(std::string_view name) {
  std::string valid;
  for (auto n : engine_names()) {
    if (n == name) return;
    valid += cat(valid.empty() ? "" : ", ", n);
  }
  throw UsageError(cat("unknown engine '", name, "' (valid: ", valid, ")"));
}

std::unique_ptr<Communicator> connect(const ConnectOptions& where, const CommOptions& options) {
  check_engine_name(where.engine);
  std::unique_ptr<Engine> engine;
  if (where.engine == "mpi")
    engine = mpi::connect_engine(options.timeout);
  else if (where.engine == "gloo")
    engine = gloo::connect_engine(where.file_store, options.timeout);
  else
    throw UsageError(
        "engine 'local' runs ranks as threads of one process; it has no process "
        "rendezvous (use comm::local::run_ranks)");
  return std::make_unique<Communicator>(std::move(engine), options);
}

}  // namespace distml::comm
