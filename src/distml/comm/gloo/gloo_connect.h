// Entry point of the gloo engine; the only gloo/ header other folders may include.
#pragma once

#include <memory>
#include <string>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "distml/comm/engine.h"

namespace distml::comm::gloo {

/// Connects through c10d's ProcessGroupGloo. Reads RANK and WORLD_SIZE from the
/// environment; rendezvous through `file_store` when not empty, else through a TCPStore at
/// MASTER_ADDR:MASTER_PORT (rank 0 serves it). Throws UsageError naming a missing or bad
/// variable, TimeoutError naming the ranks that did not join within `timeout`.
std::unique_ptr<Engine> connect_engine(const std::string& file_store, Millis timeout);

/// Connects rank `rank` of `size` through a store someone else made (PyTorch's, for the
/// c10d backend). `serves_store`: this rank hosts it, and so waits a little longer for the
/// others before naming the missing ones.
std::unique_ptr<Engine> connect_engine_over(c10::intrusive_ptr<c10d::Store> store, int rank,
                                            int size, Millis timeout, bool serves_store = false);

}  // namespace distml::comm::gloo
