#include "distml/train/strategy_factory.h"

#include <algorithm>

#include "distml/core/error.h"
#include "distml/train/strategies/allreduce_strategy.h"
#include "distml/train/strategies/easgd_async_strategy.h"
#include "distml/train/strategies/easgd_strategy.h"
#include "distml/train/strategies/gossip_strategy.h"
#include "distml/train/strategies/hybrid_strategy.h"
#include "distml/train/strategies/local_sgd_strategy.h"
#include "distml/train/strategies/post_local_sgd_strategy.h"
#include "distml/train/strategies/ps_strategy.h"
#include "distml/train/strategies/zero_strategy.h"

namespace distml::train {

LocalSgdOptions local_sgd_options(const StrategyConfig& c) {
  return {.period = c.period, .average_optimizer_state = c.average_optimizer_state};
}

// The centre moves by alpha N (mean - centre): past the mean when alpha N > 1.
EasgdOptions easgd_options(const TrainConfig& config, int world) {
  const StrategyConfig& c = config.strategy;
  if (c.alpha * world > 1)
    throw ConfigError(
        cat(config.origin("strategy.alpha"), ": strategy.alpha = ", c.alpha, " with ", world,
            " ranks: EASGD needs alpha x world size <= 1 (here ", c.alpha * world,
            "), or the centre variable overshoots the average; use alpha <= ", 1.0 / world));
  return {.period = c.period, .alpha = c.alpha};
}

namespace {

// The tables' rows take plain SGD, the one update a row exchange makes exactly (see the header).
HybridStrategyOptions hybrid_options(const TrainConfig& config) {
  const OptimizerOptions& o = config.optim;
  const char* key = o.name != "sgd"                   ? "optim.name"
                    : o.momentum > 0                  ? "optim.momentum"
                    : o.weight_decay > 0              ? "optim.weight_decay"
                    : config.train.clip_grad_norm > 0 ? "train.clip_grad_norm"
                                                      : nullptr;
  if (key)
    throw ConfigError(cat(config.origin(key), ": ", key,
                          ": strategy hybrid updates the rows of sparse embeddings with plain SGD "
                          "on the rows a step touched, which equals the dense update only for "
                          "optim.name = \"sgd\" with optim.momentum = 0, optim.weight_decay = 0 "
                          "and train.clip_grad_norm = 0; set those, or use strategy allreduce"));
  return {.dense = allreduce_options(config.strategy)};
}

}  // namespace

AllreduceStrategyOptions allreduce_options(const StrategyConfig& c) {
  AllreduceStrategyOptions o;
  o.first_bucket_bytes = static_cast<std::size_t>(c.first_bucket_mb * (1 << 20));
  o.bucket_bytes = static_cast<std::size_t>(c.bucket_mb * (1 << 20));
  o.algorithm = comm::parse_algorithm(c.algorithm);
  o.find_unused_parameters = c.find_unused_parameters;
  return o;
}

// Buckets of at most 4 MiB, whatever strategy.bucket_mb says, so that shards can balance.
PsStrategyOptions ps_options(const TrainConfig& config) {
  const StrategyConfig& c = config.strategy;
  if (config.train.clip_grad_norm > 0)
    throw ConfigError(cat(config.origin("train.clip_grad_norm"),
                          ": train.clip_grad_norm: strategy ps does not clip gradients (its "
                          "servers apply the update to gradients from several workers); set it "
                          "to 0, or use strategy allreduce or zero"));
  const AllreduceStrategyOptions buckets = allreduce_options(c);
  PsStrategyOptions o;
  o.servers = static_cast<int>(c.servers);
  o.server = {.mode = ps::parse_mode(c.mode),
              .staleness = static_cast<int>(c.staleness),
              .optim = config.optim};
  o.first_bucket_bytes = buckets.first_bucket_bytes;
  o.bucket_bytes = std::min<std::size_t>(buckets.bucket_bytes, 4u << 20);
  o.find_unused_parameters = c.find_unused_parameters;
  o.compress = config.compress;
  o.compress.seed = config.train.seed;
  if (o.compress.name == "sign" && !o.compress.error_feedback)
    throw ConfigError(cat(config.origin("compress.error_feedback"),
                          ": compress.name = sign without error feedback is signSGD's majority "
                          "vote, which needs every worker's signs at once; a parameter server "
                          "decodes each push on its own: set compress.error_feedback = true "
                          "(EF-signSGD) or use strategy allreduce"));
  if (o.compress.name != "none" && o.compress.warmup_steps > 0)
    throw ConfigError(cat(config.origin("compress.warmup_steps"),
                          ": compress.warmup_steps = ", o.compress.warmup_steps,
                          ": strategy ps compresses every push (its servers post receives of the "
                          "compressed size); set it to 0, or use strategy allreduce or local_sgd"));
  return o;
}

std::unique_ptr<Strategy> make_strategy(const TrainConfig& config, comm::Communicator& comm) {
  const StrategyConfig& c = config.strategy;
  compress::CompressOptions compress = config.compress;
  compress.seed = config.train.seed;
  if (c.name == "allreduce") {
    AllreduceStrategyOptions o = allreduce_options(c);
    o.compress = compress;
    const auto& p = config.parallel;
    if (p.schedule == "pipedream" && p.pipeline_stages > 1)  // as PipelineStage cuts the batch
      o.updates_per_step = std::min(p.micro_batches, config.train.batch_size);
    return std::make_unique<AllreduceStrategy>(comm, o);
  }
  if (c.name == "local_sgd") {
    LocalSgdOptions o = local_sgd_options(c);
    o.compress = compress;
    return std::make_unique<LocalSgdStrategy>(comm, o);
  }
  if (c.name == "ps") return std::make_unique<PsStrategy>(comm, ps_options(config));
  if (c.name == "post_local_sgd")
    return std::make_unique<PostLocalSgdStrategy>(
        comm, PostLocalSgdOptions{.warmup_steps = c.warmup_steps,
                                  .allreduce = allreduce_options(c),
                                  .local = local_sgd_options(c),
                                  .compress = compress});
  if (compress.name != "none")
    throw ConfigError(cat(config.origin("compress.name"), ": compress.name = ", compress.name,
                          " needs strategy.name = allreduce, local_sgd, post_local_sgd or ps "
                          "(compression is not built for strategy ",
                          c.name, ")"));
  if (c.name == "hybrid") return std::make_unique<HybridStrategy>(comm, hybrid_options(config));
  if (c.name == "zero") {
    return std::make_unique<ZeroStrategy>(comm,
                                          ZeroStrategyOptions{.stage = static_cast<int>(c.stage),
                                                              .prefetch = c.prefetch,
                                                              .buckets = allreduce_options(c)});
  }
  if (c.name == "easgd" && c.asynchronous)  // each worker pulls on its own: alpha <= 1 suffices
    return std::make_unique<AsyncEasgdStrategy>(comm, AsyncEasgdOptions{c.period, c.alpha});
  if (c.name == "easgd")
    return std::make_unique<EasgdStrategy>(comm, easgd_options(config, comm.size()));
  if (c.name == "gossip")
    return std::make_unique<GossipStrategy>(comm, parse_gossip_topology(c.topology));
  throw ConfigError(cat(config.source, ": strategy.name: unknown strategy '", c.name, "'"));
}

std::string why_it_cannot_shrink(const TrainConfig& config) {
  const auto& c = config.strategy;
  if (config.data.dataset == "npz")
    return "npz data is read in part by each rank, in blocks cut for the ranks that start";
  if (config.parallel.pipeline_stages > 1 || config.parallel.tensor > 1)
    return "a split model (parallel.pipeline_stages or parallel.tensor > 1) needs every stage "
           "and tensor rank it was cut for";
  if (c.name == "ps" || c.name == "hybrid")
    return cat("strategy ", c.name, " keeps parameters or table rows on ranks of their own");
  if (c.name == "easgd" && c.asynchronous)
    return "asynchronous easgd keeps its centre variable on a rank of its own";
  return "";
}

}  // namespace distml::train
