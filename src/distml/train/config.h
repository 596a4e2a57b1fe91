// The training configuration: a TOML file with sections [data], [model], [optim], [train]
// and [strategy], plus `--set section.key=value` overrides from the command line.
// Every key has a default here; the file only names what differs. An unknown key, a value of
// the wrong type or out of range is a ConfigError naming the file, the key and what was
// expected (for a typo, the nearest valid key).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "distml/nn/model_registry.h"
#include "distml/train/compress/compress_options.h"
#include "distml/train/optimizer_factory.h"

namespace distml::train {

struct DataConfig {
  std::string dataset = "mnist";  // mnist | fashion-mnist | csv | text | npz
  std::string path;               // mnist/fashion-mnist: folder (default data/<dataset>);
                                  // csv, npz: the training file; text: the corpus file
  std::string test_path;          // csv, npz: test file (else test_fraction of `path`)
  double test_fraction = 0.1;     // csv, text, npz: held-out share when there is no test file
  std::string label;              // csv: label column name (default: last column)
  std::int64_t seq_len = 64;      // text: characters per training window
};

struct TrainLoopConfig {
  std::int64_t epochs = 1;
  std::int64_t max_steps = 0;    // > 0: stop after this many optimizer steps (wins over epochs)
  std::int64_t batch_size = 64;  // per rank
  std::int64_t accumulate = 1;   // micro-steps per optimizer step (gradient accumulation)
  std::uint64_t seed = 1;
  std::int64_t threads = 1;            // intra-op threads per rank
  std::string dtype = "float32";       // parameters and arithmetic: float32 | float64
  std::string precision = "fp32";      // the forward's: fp32 | bf16 (autocast_scope.h)
  std::string loss = "cross_entropy";  // cross_entropy | mse | bce_with_logits | model
  double clip_grad_norm = 0;           // > 0: scale gradients to at most this global 2-norm
  std::int64_t log_every = 50;         // steps between metric lines
  std::int64_t eval_every = 0;         // steps between evaluations (0: at the end of each epoch)
  std::int64_t checkpoint_every = 0;   // steps between checkpoints (0: only at the end)
  std::string checkpoint_dir;          // empty: no checkpoints
  std::int64_t keep_checkpoints =
      2;                        // the newest this many are kept (an older one to fall back on)
  std::string export_path;      // final weights as a torch.load-able name -> tensor file
  std::string export_module;    // TorchScript models: the trained module, torch.jit.load-able
  double timeout_s = 300;       // deadline of every collective
  double stall_warn_s = 60;     // a collective waited in this long is reported (0: never)
  std::int64_t slow_rank = -1;  // straggler experiments: this rank's compute is slowed
  double slow_factor = 1;       // ... by this factor (it sleeps (factor - 1) x its compute)
};

struct StrategyConfig {
  std::string name = "allreduce";
  double bucket_mb = 25;  // bucket cap after the first
  double first_bucket_mb =
      1;  // the first bucket (the last parameters) is small, so it starts early
  std::string algorithm = "auto";  // all-reduce algorithm: auto | native | ring | hd | tree
  bool find_unused_parameters = false;
  std::int64_t period = 8;               // local_sgd, post_local_sgd: steps H between averages;
                                         // easgd: steps tau between elastic updates
  std::int64_t warmup_steps = 100;       // post_local_sgd: all-reduce steps before local SGD
  bool average_optimizer_state = false;  // local_sgd: average momentum / Adam moments too
  double alpha = 0.1;                    // easgd: moving rate (ranks x alpha <= 1)
  bool asynchronous = false;             // easgd: the centre on the last rank, no barrier
  std::string topology = "ring";         // gossip: ring | exponential | complete
  std::int64_t stage = 1;                // zero: 1 (optimizer state), 2 (and gradients), 3 (and
                                         // parameters, gathered layer by layer)
  bool prefetch = true;                  // zero, stage 3: gather the next layer while one runs
  std::int64_t servers = 1;              // ps: the last `servers` ranks hold the parameters
  std::string mode = "bsp";              // ps: bsp | asp | ssp
  std::int64_t staleness = 3;            // ps, ssp: steps a worker may run ahead
};

/// Model and pipeline parallelism (train/pipeline/): the world is a grid of
/// world / pipeline_stages data-parallel replicas of a pipeline of pipeline_stages ranks.
struct ParallelConfig {
  std::int64_t pipeline_stages = 1;       // 1: no pipeline
  std::int64_t micro_batches = 4;         // per step, per replica (ddg: 1)
  std::string schedule = "1f1b";          // gpipe | 1f1b | pipedream | ddg
  bool spectrain = false;                 // pipedream: predict the weights, not stash them
  bool recompute = false;                 // gpipe, 1f1b: re-compute activations in backward
  std::vector<std::int64_t> partition{};  // layers per stage; empty: balanced by parameters,
  bool partition_by_profile = false;      // or (parallel.partition = "profile") by time
  std::int64_t tensor = 1;                // ranks each stage's Linear pairs are split over
  std::int64_t max_stage_params = 0;      // the most parameters a rank may train; 0: any
};

/// Why a ddg pipeline neither writes nor resumes checkpoints.
inline constexpr const char* kDdgHoldsBatches =
    "parallel.schedule = \"ddg\" holds batches and gradients across steps, which a checkpoint "
    "does not save yet; use another schedule to checkpoint";

struct TrainConfig {
  std::string source = "<defaults>";  // the file it was read from, for messages
  /// Per key of config_keys(): the file or "--set section.key=value" that set it last, empty
  /// where the default stands. Not part of canonical_text().
  std::vector<std::string> origins;
  /// Where `key`'s value came from, to start a message about it: the file, or the --set
  /// override that set it (the file's name, too, for a default the file left alone).
  std::string origin(const std::string& key) const;
  /// Whether the file or an override set `key` (else its default stands).
  bool given(const std::string& key) const;
  DataConfig data;
  nn::ModelOptions model{.name = "lenet5"};
  OptimizerOptions optim;
  ScheduleOptions schedule;
  bool scale_lr = false;  // optim.scale_lr: linear scaling rule, lr x world size
  TrainLoopConfig train;
  StrategyConfig strategy;
  compress::CompressOptions compress;  // gradient compression (strategy allreduce)
  ParallelConfig parallel;
};

/// Reads `path` (TOML), then applies each "section.key=value" of `overrides` in order (the
/// value is parsed as a TOML value; text that is not TOML, or a value given to a string key, is
/// taken as the raw string, so `data.dataset=csv` and `data.label=1` need no quotes). Then
/// checks the rules between keys (optim.nesterov needs optim.momentum > 0). Throws ConfigError.
TrainConfig load_config(const std::string& path, const std::vector<std::string>& overrides = {});

/// Same as load_config for the text of a TOML document; `source` names it in messages.
TrainConfig parse_config(const std::string& toml_text, const std::string& source,
                         const std::vector<std::string>& overrides = {});

/// Every key as "section.key = value" lines in config_keys() order, floats printed so they read
/// back exactly: what ranks compare at start (hash it) and what a run prints and stores in its
/// checkpoint. It is itself a TOML document that parse_config reads back to the same config.
std::string canonical_text(const TrainConfig& config);

/// Every valid "section.key", for messages and --help.
const std::vector<std::string>& config_keys();

/// Every key with its value, its default and where the value came from, one per line:
/// `train.epochs = 3  # --set train.epochs=3 (default 1)`; what `distml train --print-config`
/// prints.
std::string described_config(const TrainConfig& config);

}  // namespace distml::train
