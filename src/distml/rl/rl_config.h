// The configuration of `distml rl`: a TOML file with sections [env] [network] [optim] [algo]
// [normalize] [impala] [apex] [run], plus `--set section.key=value` overrides. Every key has a
// default here; examples/rl/<algo>_<env>.toml hold the tuned values per (algorithm, environment).
// Unknown keys and bad values are ConfigErrors naming the file and the key.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "distml/rl/envs/env.h"
#include "distml/rl/normalizer.h"
#include "distml/rl/policy.h"
#include "distml/train/optimizer_factory.h"

namespace distml::rl {

struct EnvConfig {
  std::string name = "cartpole";
  std::int64_t copies = 8;  // environment copies per actor (or per actor-learner)
};

struct AlgoConfig {
  std::string name = "ppo";  // ppo | a2c | a3c | impala | apex | apex_dpg
  double gamma = 0.99;
  double lambda = 0.95;              // GAE(lambda); a2c and a3c use 1 (n-step returns)
  std::int64_t unroll = 128;         // steps per copy between updates (T)
  std::int64_t epochs = 4;           // ppo: passes over each rollout
  std::int64_t minibatches = 4;      // ppo: minibatches per pass
  double clip = 0.2;                 // ppo: surrogate clip epsilon (0: no clipping)
  double value_clip = 0;             // ppo: clip value updates to this range (0: off)
  double entropy = 0.0;              // entropy bonus coefficient
  double value_coef = 0.5;           // value loss coefficient
  double max_grad_norm = 0.5;        // 0: no clipping
  bool normalize_advantages = true;  // ppo: per minibatch
  bool anneal_lr = false;            // linearly to 0 over the run (updates for ppo, a2c, a3c;
                                     // env steps trained on for impala; env steps for apex)
  double target_kl = 0;              // ppo: stop an update's epochs once approx_kl exceeds it
                                     // (0: off)
};

struct ImpalaConfig {
  std::int64_t batch_unrolls = 4;      // unrolls per learner batch
  double clip_rho = 1.0;               // rho-bar
  double clip_c = 1.0;                 // c-bar
  double clip_pg_rho = 1.0;            // rho-bar of the policy gradient
  std::int64_t max_unrolls_ahead = 8;  // unrolls an actor may send before the learner uses them
  std::int64_t solo_unrolls = 0;       // unrolls each actor runs with the learner idle, first
                                       // (the decoupling measurement)
};

struct ApexConfig {  // apex (DQN) and apex_dpg
  std::int64_t n_step = 3;
  double epsilon = 0.4;  // DQN: actor i explores with epsilon^(1 + epsilon_alpha * i / (N - 1))
  double epsilon_alpha = 7;
  double noise = 0.3;  // DPG: actor i's Gaussian noise, noise (noise_min / noise)^(i / (N - 1))
  double noise_min = 0.05;  // ... half action ranges
  double tau = 0.005;       // DPG: target networks move this far towards the online ones per update
  std::int64_t capacity = 100000;  // replay transitions
  double alpha = 0.6;              // priority exponent
  double beta = 0.4;               // importance-sampling exponent, annealed to 1
  std::int64_t batch_size = 64;
  std::int64_t learning_starts = 2000;    // transitions in replay before the learner starts
  std::int64_t target_update = 500;       // DQN: learner steps between target-network copies
  std::int64_t param_push = 50;           // learner steps between parameter broadcasts
  std::int64_t actor_batch = 64;          // transitions an actor sends at once
  std::int64_t env_steps_per_update = 0;  // all actors' steps per learner step (0: unbounded)
};

struct RunConfig {
  std::int64_t env_steps = 100000;  // environment steps of all actors together
  std::uint64_t seed = 1;
  std::int64_t threads = 1;          // intra-op threads per rank
  std::int64_t env_workers = 1;      // threads stepping each actor's environment copies; > 1
                                     // also overlaps them with inference (double buffering)
  std::int64_t eval_episodes = 100;  // at the end, with the greedy policy
  double target_return = std::numeric_limits<double>::quiet_NaN();  // stop once target_metric
                                                                    // reaches it (nan: never)
  bool has_target = false;             // set when target_return is given as a number
  std::string target_metric = "eval";  // eval: an evaluation during the run (eval_every > 0);
                                       // train: the mean of the last 100 training episodes
  std::int64_t eval_every = 0;         // updates between evaluations during the run (0: none)
  std::int64_t eval_episodes_during = 20;
  std::int64_t log_every = 10;             // updates between progress lines
  std::string checkpoint_dir;              // empty: no checkpoints
  std::string resume;                      // a checkpoint directory to continue from
  std::int64_t checkpoint_every = 0;       // updates between checkpoints (0: only at the end)
  double timeout_s = 120;                  // deadline of every blocking operation
  double stall_warn_s = 60;                // the stall inspector (comm/stall_inspector.h); 0: off
  double actor_timeout_s = 60;             // an actor silent this long is reported lost
  std::string on_actor_loss = "continue";  // continue | stop
  std::int64_t fault_actor = -1;           // tests: this actor rank stops after fault_after
  std::int64_t fault_after = 0;            // ... messages, without saying goodbye
};

struct RlConfig {
  std::string source = "<defaults>";
  EnvConfig env;
  NetworkOptions network;
  train::OptimizerOptions optim{.name = "adam", .lr = 3e-4, .eps = 1e-5};
  AlgoConfig algo;
  NormalizeConfig normalize;  // on by default for continuous actions (load_rl_config)
  ImpalaConfig impala;
  ApexConfig apex;
  RunConfig run;
  /// Per key (rl_config_keys() order): what set it, or empty where the default stands.
  std::vector<std::string> origins;
  bool given(const std::string& key) const;
  /// What set `key`: its origin when given, else the config's source.
  std::string origin(const std::string& key) const;
};

/// ppo, a2c, a3c, impala, apex, apex_dpg.
const std::vector<std::string>& algorithm_names();

/// Reads `path` (empty: defaults only), applies the overrides, resolves the defaults that depend
/// on the algorithm and the environment, and checks the rules between keys:
///  - [normalize] observations and rewards are on for continuous actions (where CleanRL's PPO
///    normalises), off for discrete ones and for apex and apex_dpg (which refuse them: their
///    replay keeps raw transitions);
///  - a2c and a3c are one pass over one minibatch without clipping, with n-step returns
///    (algo.epochs 1, algo.minibatches 1, algo.clip 0, algo.lambda 1): those are their defaults,
///    and another value given for them is refused with the reason.
RlConfig load_rl_config(const std::string& path, const std::vector<std::string>& overrides);
/// Every key as "section.key = value" lines in canonical order (hashed to compare ranks).
std::string canonical_text(const RlConfig& config);
/// How the environments of this run are made (run.timeout_s for external ones).
inline EnvOptions env_options(const RlConfig& config) { return {config.run.timeout_s}; }
/// A hash of canonical_text: every rank of a run must have the same.
std::uint64_t fingerprint(const RlConfig& config);
/// canonical_text with, beside each key, what set it (the file, a --set, or "default").
std::string described_config(const RlConfig& config);

}  // namespace distml::rl
