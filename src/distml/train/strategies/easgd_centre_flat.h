// Asynchronous EASGD's centre rank (easgd_async_strategy.h) over the model's parameters in
// place, for callers without torch (the Python module's DistributedOptimizer, whose workers run
// their side of the protocol in distml/_easgd.py). Defined in easgd_async_strategy.cc.
#pragma once

#include <vector>

#include "distml/comm/communicator.h"
#include "distml/train/strategies/flat_parameter.h"

namespace distml::train::easgd {

/// The protocol's point-to-point tags (a worker's exchange, whose answer comes back on the same
/// tag; its control words; worker 0's parameters after a resume) and control words.
inline constexpr int kExchangeTag = 1, kControlTag = 2, kResumeTag = 3;
inline constexpr double kSync = 1, kStop = 2;

/// On the last rank of `world`: serves the other ranks' exchanges, syncs and stops (3. to 5. of
/// easgd_async_strategy.h) with elastic rate `alpha` until every worker has stopped; the centre
/// variable is in `params` (every trainable parameter, in order) at the end. `resumed`: first
/// takes worker 0's parameters, the centre a checkpoint saved (6.).
void serve_centre_flat(comm::Communicator& world, const std::vector<FlatParameter>& params,
                       double alpha, bool resumed);

}  // namespace distml::train::easgd
