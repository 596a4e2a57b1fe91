// The start-up handshake every communicator runs: the ranks compare a fingerprint (distml
// version, engine, world size and the caller's hash) before any other traffic.
#pragma once

#include <vector>

#include "distml/comm/communicator.h"
#include "distml/comm/engine.h"

namespace distml::comm {

/// Throws CommError on every rank when the fingerprints differ (naming what and where), and
/// TimeoutError naming the ranks that did not arrive within options.timeout. Returns each
/// rank's host, numbered 0, 1, ... in the order of each host's lowest rank: ranks whose host
/// names are the same (or, with options.emulated_ranks_per_host, rank / that number).
std::vector<int> exchange_fingerprint(Engine& engine, const CommOptions& options);

}  // namespace distml::comm
