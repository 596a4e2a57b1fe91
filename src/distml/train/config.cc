// Reads the training configuration. Every key is one row of a table that says where the value
// lives in TrainConfig, what it accepts and how it prints (see core/config_schema.h), so parsing,
// validation, messages, config_keys() and canonical_text() all follow from that table and a new
// key is one row.
#include "distml/train/config.h"

#include <algorithm>

#include "distml/core/config_schema.h"
#include "distml/core/error.h"

namespace distml::train {
namespace {

// The strategies a run can name: a new strategy is one more entry here.
const std::vector<std::string>& strategy_names() {
  static const std::vector<std::string> names = {
      "allreduce", "ps", "local_sgd", "post_local_sgd", "easgd", "gossip", "zero", "hybrid"};
  return names;
}

// parallel.partition: "balanced" (by parameter count), "profile" (by measured time), or the
// layer count of each stage.
config::KeySpec<TrainConfig> partition_key() {
  auto spec = config::Keys<TrainConfig>::int_list_key("parallel", "partition", 1, 1,
                                                      CONFIG_FIELD(parallel.partition));
  spec.expected = "\"balanced\", \"profile\" or an array of layer counts >= 1, one per stage";
  spec.assign = [list = spec.assign](const toml::node& node, TrainConfig& c) {
    const auto rule = node.value_exact<std::string>();
    c.parallel.partition_by_profile = rule == "profile";
    if (rule == "balanced" || rule == "profile") {
      c.parallel.partition.clear();
      return true;
    }
    return list(node, c);
  };
  spec.print = [list = spec.print](const TrainConfig& c) {
    if (c.parallel.partition_by_profile) return std::string("\"profile\"");
    return c.parallel.partition.empty() ? std::string("\"balanced\"") : list(c);
  };
  return spec;
}

// Every key in canonical order. The ranges are what the code that reads each value needs; the
// cross-key rules are in check_consistency().
std::vector<config::KeySpec<TrainConfig>> key_specs() {
  using K = config::Keys<TrainConfig>;
  return {
      K::choice_key("data", "dataset", {"mnist", "fashion-mnist", "csv", "text", "npz"},
                    CONFIG_FIELD(data.dataset)),
      K::string_key("data", "path", CONFIG_FIELD(data.path)),
      K::string_key("data", "test_path", CONFIG_FIELD(data.test_path)),
      K::float_key("data", "test_fraction", config::kOpenUnit, CONFIG_FIELD(data.test_fraction)),
      K::string_key("data", "label", CONFIG_FIELD(data.label)),
      K::int_key("data", "seq_len", 1, CONFIG_FIELD(data.seq_len)),

      K::choice_key("model", "name", nn::model_names(), CONFIG_FIELD(model.name)),
      K::string_key("model", "path", CONFIG_FIELD(model.path)),
      K::int_list_key("model", "layers", 2, 1, CONFIG_FIELD(model.mlp_layers)),
      K::int_key("model", "vocab_size", 0, CONFIG_FIELD(model.vocab_size)),
      K::int_key("model", "embedding_dim", 1, CONFIG_FIELD(model.embedding_dim)),
      K::int_key("model", "hidden_size", 1, CONFIG_FIELD(model.hidden_size)),
      K::int_key("model", "lstm_layers", 1, CONFIG_FIELD(model.lstm_layers)),

      K::choice_key("optim", "name", {"sgd", "adam", "adamw"}, CONFIG_FIELD(optim.name)),
      K::float_key("optim", "lr", config::kPositive, CONFIG_FIELD(optim.lr)),
      K::float_key("optim", "momentum", config::kNonNegative, CONFIG_FIELD(optim.momentum)),
      K::bool_key("optim", "nesterov", CONFIG_FIELD(optim.nesterov)),
      K::float_key("optim", "weight_decay", config::kNonNegative, CONFIG_FIELD(optim.weight_decay)),
      K::float_key("optim", "beta1", config::kHalfOpenUnit, CONFIG_FIELD(optim.beta1)),
      K::float_key("optim", "beta2", config::kHalfOpenUnit, CONFIG_FIELD(optim.beta2)),
      K::float_key("optim", "eps", config::kPositive, CONFIG_FIELD(optim.eps)),
      K::bool_key("optim", "scale_lr", CONFIG_FIELD(scale_lr)),
      K::choice_key("optim", "schedule", {"constant", "step", "cosine"},
                    CONFIG_FIELD(schedule.name)),
      K::int_key("optim", "warmup_steps", 0, CONFIG_FIELD(schedule.warmup_steps)),
      K::int_key("optim", "step_size", 1, CONFIG_FIELD(schedule.step_size)),
      K::float_key("optim", "gamma", config::kPositive, CONFIG_FIELD(schedule.gamma)),
      K::float_key("optim", "min_lr", config::kNonNegative, CONFIG_FIELD(schedule.min_lr)),

      K::int_key("train", "epochs", 1, CONFIG_FIELD(train.epochs)),
      K::int_key("train", "max_steps", 0, CONFIG_FIELD(train.max_steps)),
      K::int_key("train", "batch_size", 1, CONFIG_FIELD(train.batch_size)),
      K::int_key("train", "accumulate", 1, CONFIG_FIELD(train.accumulate)),
      K::int_key("train", "seed", 0, CONFIG_FIELD(train.seed)),
      K::int_key("train", "threads", 1, CONFIG_FIELD(train.threads)),
      K::choice_key("train", "dtype", {"float32", "float64"}, CONFIG_FIELD(train.dtype)),
      K::choice_key("train", "precision", {"fp32", "bf16", "fp16"}, CONFIG_FIELD(train.precision)),
      K::choice_key("train", "loss", {"cross_entropy", "mse", "bce_with_logits", "model"},
                    CONFIG_FIELD(train.loss)),
      K::float_key("train", "clip_grad_norm", config::kNonNegative,
                   CONFIG_FIELD(train.clip_grad_norm)),
      K::int_key("train", "log_every", 1, CONFIG_FIELD(train.log_every)),
      K::int_key("train", "eval_every", 0, CONFIG_FIELD(train.eval_every)),
      K::int_key("train", "checkpoint_every", 0, CONFIG_FIELD(train.checkpoint_every)),
      K::string_key("train", "checkpoint_dir", CONFIG_FIELD(train.checkpoint_dir)),
      K::int_key("train", "keep_checkpoints", 1, CONFIG_FIELD(train.keep_checkpoints)),
      K::string_key("train", "export", CONFIG_FIELD(train.export_path)),
      K::string_key("train", "export_module", CONFIG_FIELD(train.export_module)),
      K::float_key("train", "timeout_s", config::kPositive, CONFIG_FIELD(train.timeout_s)),
      K::float_key("train", "stall_warn_s", config::kNonNegative, CONFIG_FIELD(train.stall_warn_s)),
      K::int_key("train", "slow_rank", -1, CONFIG_FIELD(train.slow_rank)),
      K::float_key("train", "slow_factor", config::kAtLeastOne, CONFIG_FIELD(train.slow_factor)),

      K::choice_key("strategy", "name", strategy_names(), CONFIG_FIELD(strategy.name)),
      K::float_key("strategy", "bucket_mb", config::kPositive, CONFIG_FIELD(strategy.bucket_mb)),
      K::float_key("strategy", "first_bucket_mb", config::kPositive,
                   CONFIG_FIELD(strategy.first_bucket_mb)),
      K::choice_key("strategy", "algorithm",
                    {"auto", "native", "ring", "hd", "tree", "hierarchical", "shm"},
                    CONFIG_FIELD(strategy.algorithm)),
      K::bool_key("strategy", "find_unused_parameters",
                  CONFIG_FIELD(strategy.find_unused_parameters)),
      K::int_key("strategy", "period", 1, CONFIG_FIELD(strategy.period)),
      K::int_key("strategy", "warmup_steps", 0, CONFIG_FIELD(strategy.warmup_steps)),
      K::bool_key("strategy", "average_optimizer_state",
                  CONFIG_FIELD(strategy.average_optimizer_state)),
      K::float_key("strategy", "alpha", config::kClosedUnit, CONFIG_FIELD(strategy.alpha)),
      K::bool_key("strategy", "asynchronous", CONFIG_FIELD(strategy.asynchronous)),
      K::choice_key("strategy", "topology", {"ring", "exponential", "complete"},
                    CONFIG_FIELD(strategy.topology)),
      K::int_key("strategy", "stage", 1, CONFIG_FIELD(strategy.stage)),
      K::bool_key("strategy", "prefetch", CONFIG_FIELD(strategy.prefetch)),
      K::int_key("strategy", "servers", 1, CONFIG_FIELD(strategy.servers)),
      K::choice_key("strategy", "mode", {"bsp", "asp", "ssp"}, CONFIG_FIELD(strategy.mode)),
      K::int_key("strategy", "staleness", 0, CONFIG_FIELD(strategy.staleness)),

      K::choice_key("compress", "name", compress::compressor_names(), CONFIG_FIELD(compress.name)),
      K::float_key("compress", "ratio", config::Range{0, 1, true, false, "in (0, 1]"},
                   CONFIG_FIELD(compress.ratio)),
      K::int_key("compress", "levels", 1, CONFIG_FIELD(compress.levels)),
      K::int_key("compress", "rank", 1, CONFIG_FIELD(compress.rank)),
      K::bool_key("compress", "error_feedback", CONFIG_FIELD(compress.error_feedback)),
      K::int_key("compress", "warmup_steps", 0, CONFIG_FIELD(compress.warmup_steps)),

      K::int_key("parallel", "pipeline_stages", 1, CONFIG_FIELD(parallel.pipeline_stages)),
      K::int_key("parallel", "tensor", 1, CONFIG_FIELD(parallel.tensor)),
      K::int_key("parallel", "micro_batches", 1, CONFIG_FIELD(parallel.micro_batches)),
      K::choice_key("parallel", "schedule", {"gpipe", "1f1b", "pipedream", "ddg"},
                    CONFIG_FIELD(parallel.schedule)),
      K::bool_key("parallel", "spectrain", CONFIG_FIELD(parallel.spectrain)),
      K::bool_key("parallel", "recompute", CONFIG_FIELD(parallel.recompute)),
      K::int_key("parallel", "max_stage_params", 0, CONFIG_FIELD(parallel.max_stage_params)),
      partition_key(),
  };
}

// The table, read once; `train.epochs` is the example an override without a section is shown.
const config::Schema<TrainConfig>& schema() {
  static const config::Schema<TrainConfig> schema(key_specs(), "train.epochs");
  return schema;
}

// What a split model (parallel.pipeline_stages > 1 or parallel.tensor > 1) does not combine
// with yet.
void check_pipeline(const TrainConfig& c) {
  const auto& p = c.parallel;
  if (p.recompute && (p.schedule == "pipedream" || p.schedule == "ddg"))
    throw ConfigError(cat(c.origin("parallel.recompute"), ": parallel.schedule = \"", p.schedule,
                          "\" re-computes its forwards already; parallel.recompute is for "
                          "\"gpipe\" and \"1f1b\""));
  if (p.spectrain && p.schedule != "pipedream")
    throw ConfigError(cat(c.origin("parallel.spectrain"),
                          ": parallel.spectrain predicts the weights of the asynchronous "
                          "pipeline; set parallel.schedule = \"pipedream\""));
  if (p.spectrain && !(c.optim.name == "sgd" && c.optim.momentum > 0))
    throw ConfigError(cat(c.origin("parallel.spectrain"),
                          ": parallel.spectrain extrapolates the weights along the momentum; it "
                          "needs optim.name = \"sgd\" with optim.momentum > 0"));
  if (p.schedule == "ddg" && p.micro_batches != 1)
    throw ConfigError(cat(c.origin("parallel.micro_batches"),
                          ": parallel.schedule = \"ddg\" pipelines whole batches, one per step; "
                          "parallel.micro_batches must be 1, got ",
                          p.micro_batches));
  if (p.schedule == "pipedream" && c.strategy.name != "allreduce")
    throw ConfigError(cat(c.origin("parallel.schedule"),
                          ": parallel.schedule = \"pipedream\" updates after every micro-batch; "
                          "its replicas use strategy.name = \"allreduce\", got \"",
                          c.strategy.name, "\""));
  if (p.pipeline_stages == 1 && p.tensor == 1) return;
  const auto refuse = [&](const std::string& key, const std::string& what) {
    throw ConfigError(cat(c.origin(key), ": ", what, " does not combine with a split model ",
                          "(parallel.pipeline_stages = ", p.pipeline_stages,
                          ", parallel.tensor = ", p.tensor, ") yet"));
  };
  const std::string& s = c.strategy.name;
  if (s == "ps" || s == "hybrid" || (s == "easgd" && c.strategy.asynchronous))
    refuse("strategy.name",
           cat("strategy.name = \"", s, "\"", s == "easgd" ? " (asynchronous)" : ""));
  if (c.train.accumulate > 1)
    refuse("train.accumulate", "train.accumulate (use parallel.micro_batches)");
  if (c.train.clip_grad_norm > 0) refuse("train.clip_grad_norm", "train.clip_grad_norm");
  if (!c.train.checkpoint_dir.empty() && p.schedule == "ddg")
    throw ConfigError(cat(c.origin("train.checkpoint_dir"), ": ", kDdgHoldsBatches));
  if (p.tensor > 1 && c.compress.name != "none")
    throw ConfigError(
        cat(c.origin("compress.name"), ": compress.name = ", c.compress.name,
            " with parallel.tensor = ", p.tensor,
            ": every tensor rank holds a whole copy of a row-parallel Linear's "
            "bias, and compressing each rank's bucket on its own would update the "
            "copies differently; set compress.name = \"none\" or parallel.tensor = 1"));
  if (c.train.loss == "model") refuse("train.loss", "train.loss = \"model\"");
  if (p.pipeline_stages > 1 && !p.partition.empty() &&
      static_cast<std::int64_t>(p.partition.size()) != p.pipeline_stages)
    throw ConfigError(cat(c.origin("parallel.partition"), ": parallel.partition lists ",
                          p.partition.size(),
                          " layer counts for parallel.pipeline_stages = ", p.pipeline_stages));
}

// train.precision: what LibTorch 1.13's CPU autocast can do, with what distml runs under it.
// ZeRO stage 3 runs the model's layers one by one (strategies/zero_layers.h).
void check_zero3(const TrainConfig& c) {
  if (c.strategy.name != "zero" || c.strategy.stage != 3) return;
  const auto& p = c.parallel;
  if (p.pipeline_stages > 1 || p.tensor > 1)
    throw ConfigError(cat(c.origin("strategy.stage"),
                          ": strategy.stage = 3 shards the parameters of whole replicas; it does "
                          "not combine with a split model (parallel.pipeline_stages = ",
                          p.pipeline_stages, ", parallel.tensor = ", p.tensor,
                          ") yet: use stage 1 or 2 there"));
  if (c.train.loss == "model")
    throw ConfigError(cat(c.origin("train.loss"),
                          ": train.loss = \"model\" calls the module's forward(x, y) whole, and "
                          "strategy.stage = 3 must run the model layer by layer to gather each "
                          "layer's parameters; use a forward(x) model with a loss by name"));
}

void check_precision(const TrainConfig& c) {
  const auto& t = c.train;
  if (t.precision == "fp32") return;
  const std::string at = c.origin("train.precision");
  if (t.precision == "fp16")
    throw ConfigError(cat(at,
                          ": train.precision = \"fp16\" is refused: LibTorch 1.13's CPU autocast "
                          "casts to bfloat16 only (its CPU kernels have no float16 path for "
                          "matrix products); use \"bf16\", which keeps float32's range and so "
                          "needs no loss scaling"));
  if (t.dtype != "float32")
    throw ConfigError(cat(at, ": train.precision = \"", t.precision,
                          "\" casts float32 to bfloat16; autocast leaves train.dtype = \"", t.dtype,
                          "\" as it is: set train.dtype = \"float32\""));
}

// Defaults that depend on another key: ddg pipelines whole batches, so its micro-batch count
// is 1 unless the file or an override sets one (which check_pipeline then refuses).
void resolve_defaults(TrainConfig& c) {
  if (c.parallel.schedule == "ddg" && !c.given("parallel.micro_batches"))
    c.parallel.micro_batches = 1;
}

// Rules that involve more than one key; checked once the file and every override are in.
void check_consistency(const TrainConfig& c) {
  if (c.optim.nesterov && !(c.optim.momentum > 0))
    throw ConfigError(cat(c.origin("optim.nesterov"),
                          ": optim.nesterov = true needs optim.momentum > 0, got ",
                          config::format_float(c.optim.momentum)));
  if (!c.train.export_module.empty() && c.model.name != "torchscript")
    throw ConfigError(
        cat(c.origin("train.export_module"),
            ": train.export_module writes a TorchScript module, which only ",
            "model.name = \"torchscript\" has; use train.export for the weights of \"",
            c.model.name, "\""));
  if (c.strategy.stage > 3)
    throw ConfigError(cat(c.origin("strategy.stage"),
                          ": strategy.stage: expected 1, 2 or 3 (ZeRO stages), got ",
                          c.strategy.stage));
  check_zero3(c);
  if (c.compress.levels > 127)
    throw ConfigError(cat(c.origin("compress.levels"),
                          ": compress.levels: expected 1 to 127 (QSGD's levels travel in 7 bits), "
                          "got ",
                          c.compress.levels));
  check_precision(c);
  check_pipeline(c);
}

}  // namespace

TrainConfig load_config(const std::string& path, const std::vector<std::string>& overrides) {
  return parse_config(config::read_config_text(path), path, overrides);
}

TrainConfig parse_config(const std::string& toml_text, const std::string& source,
                         const std::vector<std::string>& overrides) {
  std::vector<std::string> origins;
  TrainConfig config = config::parse_with(schema(), toml_text, source, overrides, &origins);
  config.source = source;
  config.origins = std::move(origins);
  resolve_defaults(config);
  check_consistency(config);
  return config;
}

std::string canonical_text(const TrainConfig& config) { return schema().canonical_text(config); }

const std::vector<std::string>& config_keys() { return schema().keys(); }

namespace {

// The index of `key` in config_keys() (and in origins).
std::size_t key_index(const std::string& key) {
  const auto& keys = config_keys();
  const auto at = static_cast<std::size_t>(std::find(keys.begin(), keys.end(), key) - keys.begin());
  DML_CHECK(at < keys.size(), "an unknown key: ", key);
  return at;
}

}  // namespace

bool TrainConfig::given(const std::string& key) const {
  const auto at = key_index(key);
  return at < origins.size() && !origins[at].empty();
}

std::string TrainConfig::origin(const std::string& key) const {
  return given(key) ? origins[key_index(key)] : source;
}

std::string described_config(const TrainConfig& config) {
  const TrainConfig defaults;
  std::string text;
  const auto& specs = schema().specs();
  for (std::size_t i = 0; i < specs.size(); ++i) {
    const std::string value = specs[i].print(config), default_value = specs[i].print(defaults);
    const bool set = i < config.origins.size() && !config.origins[i].empty();
    std::string line = cat(specs[i].dotted(), " = ", value);
    line.resize(std::max<std::size_t>(line.size() + 2, 48), ' ');
    text += cat(line, "# ", set ? config.origins[i] : "default",
                set ? cat(" (default ", default_value, ")") : "", "\n");
  }
  return text;
}

}  // namespace distml::train
