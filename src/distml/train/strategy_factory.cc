#include "distml/train/strategy_factory.h"

#include "distml/core/error.h"
#include "distml/train/strategies/allreduce_strategy.h"

namespace distml::train {
namespace {

AllreduceStrategyOptions allreduce_options(const StrategyConfig& c) {
  AllreduceStrategyOptions o;
  o.first_bucket_bytes = static_cast<std::size_t>(c.first_bucket_mb * (1 << 20));
  o.bucket_bytes = static_cast<std::size_t>(c.bucket_mb * (1 << 20));
  o.algorithm = comm::parse_algorithm(c.algorithm);
  o.find_unused_parameters = c.find_unused_parameters;
  return o;
}

}  // namespace

std::unique_ptr<Strategy> make_strategy(const TrainConfig& config, comm::Communicator& comm) {
  const StrategyConfig& c = config.strategy;
  if (c.name == "allreduce") return std::make_unique<AllreduceStrategy>(comm, allreduce_options(c));
  throw ConfigError(cat(config.source, ": strategy.name: unknown strategy '", c.name, "'"));
}

}  // namespace distml::train
