// A minimal distml program: every rank contributes its rank number and all receive the sum.
// Run it with any engine:
//   build/distml launch -n 4 -- build/examples/allreduce_example            (mpi)
//   build/distml launch -n 4 --engine gloo -- build/examples/allreduce_example
#include <cstdio>
#include <vector>

#include "distml/comm/engines.h"

int main() try {
  using namespace distml::comm;
  auto comm = connect();  // the engine and ranks that `distml launch` set

  std::vector<float> grad(1 << 20, static_cast<float>(comm->rank()));
  comm->allreduce(view(grad), {.op = ReduceOp::avg, .algorithm = Algorithm::ring});

  auto work = comm->iallreduce(view(grad));  // asynchronous: overlap it with compute
  work.wait();                               // rethrows any failure, with its cause

  if (comm->rank() == 0)
    std::printf("%d ranks on %s: grad[0] = %.1f\n", comm->size(),
                std::string(comm->engine_name()).c_str(), grad[0]);
} catch (const std::exception& e) {  // distml's errors say what went wrong and where
  std::fprintf(stderr, "allreduce_example: %s\n", e.what());
  return 2;
}
