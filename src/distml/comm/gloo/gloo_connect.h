// Entry point of the gloo engine; with gloo_store_connect.h (which brings in c10d's headers,
// for the one caller that has a store of its own) the only gloo/ headers other folders may
// include.
#pragma once

#include <memory>
#include <string>

#include "distml/comm/engine.h"

namespace distml::comm::gloo {

/// Connects through c10d's ProcessGroupGloo. Reads RANK and WORLD_SIZE from the
/// environment; rendezvous through `file_store` when not empty, else through a TCPStore at
/// MASTER_ADDR:MASTER_PORT (rank 0 serves it). Throws UsageError naming a missing or bad
/// variable, TimeoutError naming the ranks that did not join within `timeout`.
std::unique_ptr<Engine> connect_engine(const std::string& file_store, Millis timeout);

}  // namespace distml::comm::gloo
