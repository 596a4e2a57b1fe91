// The gloo engine over a store someone else made: PyTorch's, for the c10d backend (python/).
// Apart from gloo_connect.h, so that the engine's other users do not compile c10d's headers.
#pragma once

#include <memory>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "distml/comm/engine.h"

namespace distml::comm::gloo {

/// Connects rank `rank` of `size` through `store`. `serves_store`: this rank hosts it, and so
/// waits a little longer for the others before naming the missing ones.
std::unique_ptr<Engine> connect_engine_over(c10::intrusive_ptr<c10d::Store> store, int rank,
                                            int size, Millis timeout, bool serves_store = false);

}  // namespace distml::comm::gloo
