// Who did not arrive: the exchange every live rank runs after a collective times out.
#pragma once

#include <cstdint>
#include <string>

#include "distml/comm/engine.h"

namespace distml::comm {

/// Sends this rank's operation number `seq` to every peer on the collective channel under
/// `tag` and listens for theirs for `grace`. Returns "ranks that did not arrive: 2, 3" for
/// the peers not heard from at or past `seq` (a rank that arrived later than `grace` after
/// this one is counted as missing), or a note that all of them arrived.
std::string diagnose_missing(Engine& engine, std::uint64_t seq, int tag, Millis grace);

}  // namespace distml::comm
