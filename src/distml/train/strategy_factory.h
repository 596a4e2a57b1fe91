// The strategy a configuration names (strategy.name and its keys).
#pragma once

#include <memory>

#include "distml/comm/communicator.h"
#include "distml/train/config.h"
#include "distml/train/strategies/allreduce_strategy.h"
#include "distml/train/strategies/easgd_strategy.h"
#include "distml/train/strategies/local_sgd_strategy.h"
#include "distml/train/strategies/ps_strategy.h"
#include "distml/train/strategy.h"

namespace distml::train {

/// The options the strategies are built with: the simulator (src/distml/sim/) takes its
/// decisions from them too. ps_options: ConfigError for keys the parameter server refuses;
/// easgd_options (synchronous EASGD) for an alpha that overshoots on `world` ranks.
AllreduceStrategyOptions allreduce_options(const StrategyConfig& c);
PsStrategyOptions ps_options(const TrainConfig& config);
LocalSgdOptions local_sgd_options(const StrategyConfig& c);
EasgdOptions easgd_options(const TrainConfig& config, int world);

/// ConfigError when the strategy's keys do not fit this run (world size, other keys).
std::unique_ptr<Strategy> make_strategy(const TrainConfig& config, comm::Communicator& comm);

/// Why a run of this configuration cannot go on with fewer ranks from its checkpoint
/// (--min-np); empty when it can. Those that can are the data-parallel strategies, whose
/// replicas are one model at a checkpoint and whose per-rank state, if any, is a compressor's
/// residual that a lost rank may take with it, and ZeRO, which cuts its optimizer shards again.
std::string why_it_cannot_shrink(const TrainConfig& config);

}  // namespace distml::train
