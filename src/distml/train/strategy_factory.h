// The strategy a configuration names (strategy.name and its keys).
#pragma once

#include <memory>

#include "distml/comm/communicator.h"
#include "distml/train/config.h"
#include "distml/train/strategy.h"

namespace distml::train {

/// ConfigError when the strategy's keys do not fit this run (world size, other keys).
std::unique_ptr<Strategy> make_strategy(const TrainConfig& config, comm::Communicator& comm);

}  // namespace distml::train
