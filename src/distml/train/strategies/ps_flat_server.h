// A parameter server over the model's parameters in place, for callers without torch (the
// Python module's DistributedOptimizer): the server's side of ps_strategy.h's protocol
// (ps_server.h). Defined in ps_server.cc.
#pragma once

#include <vector>

#include "distml/comm/communicator.h"
#include "distml/train/compress/compress_options.h"
#include "distml/train/strategies/flat_parameter.h"
#include "distml/train/strategies/ps_protocol.h"

namespace distml::train::ps {

/// On a server rank of `layout`: serves the workers until every one has stopped, updating
/// this server's buckets of `params` (every trainable parameter, in order) in place; then,
/// collective over `world`, the servers' reports summed (sum_reports). `resumed`: first,
/// worker 0's checkpoint parameters and this server's optimizer state (receive_resume).
/// `compress`: the workers' compressor (their pushes are packed), or null.
ServerReport serve_flat(comm::Communicator& world, const Layout& layout,
                        const std::vector<FlatParameter>& params, const ServerOptions& options,
                        bool resumed, const compress::CompressOptions* compress);

}  // namespace distml::train::ps
