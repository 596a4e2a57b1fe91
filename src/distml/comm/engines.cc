#include "distml/comm/engines.h"

#include <cstdlib>

#include "distml/comm/engine.h"
#include "distml/comm/mpi/mpi_connect.h"
#include "distml/comm/slurm_env.h"
#ifndef DISTML_NO_GLOO
#include "distml/comm/gloo/gloo_connect.h"
#endif

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
  if (where.engine == "mpi") {
    check_mpi_can_start();  // srun without PMIx: say so before MPI_Init aborts
    engine = mpi::connect_engine(options.timeout);
  } else if (where.engine == "gloo")
#ifdef DISTML_NO_GLOO  // distml_engines_without_gloo: the gloo engine needs LibTorch's c10d
    throw UsageError(
        "this binary is built without the gloo engine (it needs LibTorch); the distml command "
        "runs gloo jobs in distml-torch");
#else
    engine = gloo::connect_engine(where.file_store, options.timeout);
#endif
  else
    throw UsageError(
        "engine 'local' runs ranks as threads of one process; it has no process "
        "rendezvous (use comm::local::run_ranks)");
  auto comm = std::make_unique<Communicator>(std::move(engine), options);
  for (const char* var : {"WORLD_SIZE", "OMPI_COMM_WORLD_SIZE"}) {
    const char* size = std::getenv(var);
    if (size && std::atoi(size) != comm->size())
      throw UsageError(cat("this process joined a world of ", comm->size(), " rank(s) over ",
                           where.engine, ", but its launcher started ", size, " (", var, "=", size,
                           "): connect with the launcher's engine (", "DISTML_ENGINE=",
                           std::getenv("DISTML_ENGINE") ? std::getenv("DISTML_ENGINE") : "unset",
                           "; comm::connect() reads it)"));
  }
  return comm;
}

void adopt_mpirun_rank_variables() {
  const char* rank = std::getenv("OMPI_COMM_WORLD_RANK");
  const char* size = std::getenv("OMPI_COMM_WORLD_SIZE");
  if (rank && size) {
    ::setenv("RANK", rank, 0);
    ::setenv("WORLD_SIZE", size, 0);
  }
}

std::unique_ptr<Communicator> connect(const CommOptions& options) {
  ConnectOptions where;
  if (const char* engine = std::getenv("DISTML_ENGINE"))
    where.engine = engine;
  else if (srun_task_without_pmix())
    where.engine = "gloo";  // srun started the ranks without what MPI needs to meet
  check_engine_name(where.engine);
  if (where.engine == "local")
    throw UsageError(
        "DISTML_ENGINE=local: the local engine runs ranks as threads of one process, with no "
        "launcher; start the program with `distml launch --engine mpi|gloo`, or run its ranks "
        "with comm::local::run_ranks");
  if (where.engine == "gloo") {
    adopt_mpirun_rank_variables();
    adopt_slurm_rank_variables();
  }
  return connect(where, options);
}

}  // namespace distml::comm
