// A minimal distml program: every rank contributes its rank number and all receive the sum.
// Run it with any engine:
//   build/distml launch -n 4 -- build/examples/allreduce_example            (mpi)
//   build/distml launch -n 4 --engine gloo -- build/examples/allreduce_example
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "distml/comm/engines.h"

int main() {
  using namespace distml::comm;
  ConnectOptions where;
  if (const char* engine = std::getenv("DISTML_ENGINE")) where.engine = engine;  // from launch
  auto comm = connect(where, CommOptions{});

  std::vector<float> grad(1 << 20, static_cast<float>(comm->rank()));
  comm->allreduce(view(grad), {.op = ReduceOp::avg, .algorithm = Algorithm::ring});

  auto work = comm->iallreduce(view(grad));  // asynchronous: overlap it with compute
  work.wait();                               // rethrows any failure, with its cause

  if (comm->rank() == 0)
    std::printf("%d ranks on %s: grad[0] = %.1f\n", comm->size(),
                std::string(comm->engine_name()).c_str(), grad[0]);
}
