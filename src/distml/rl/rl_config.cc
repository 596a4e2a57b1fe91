#include "distml/rl/rl_config.h"

#include <algorithm>
#include <cmath>

#include "distml/core/config_schema.h"
#include "distml/core/error.h"
#include "distml/core/fnv1a.h"
#include "distml/rl/envs/env.h"

namespace distml::rl {
namespace {

using K = config::Keys<RlConfig>;
using config::kAtLeastOne;
using config::kClosedUnit;
using config::kNonNegative;
using config::kOpenUnit;
using config::kPositive;

const config::Range kAnyNumber{-config::kInf, config::kInf, true, true, "(any finite number)"};

// run.target_return: a number turns the target on; nan, the default, leaves it off (so that
// the canonical text of a config without a target, which prints it, reads back as one).
config::KeySpec<RlConfig> target_key() {
  auto spec = K::float_key("run", "target_return", kAnyNumber, CONFIG_FIELD(run.target_return));
  spec.assign = [assign = spec.assign](const toml::node& node, RlConfig& c) {
    if (const auto* value = node.as_floating_point(); value && std::isnan(value->get())) {
      c.run.target_return = value->get();
      c.run.has_target = false;
      return true;
    }
    return assign(node, c) && (c.run.has_target = true);
  };
  return spec;
}

}  // namespace

const std::vector<std::string>& algorithm_names() {
  static const std::vector<std::string> names = {"ppo", "a2c", "a3c", "impala", "apex", "apex_dpg"};
  return names;
}

namespace {

const config::Schema<RlConfig>& schema() {
  static const config::Schema<RlConfig> s(
      {
          // Checked after parsing: environments registered later are known by then.
          K::string_key("env", "name", CONFIG_FIELD(env.name)),
          K::int_key("env", "copies", 1, CONFIG_FIELD(env.copies)),
          K::int_list_key("network", "hidden", 1, 1, CONFIG_FIELD(network.hidden)),
          K::bool_key("network", "tanh", CONFIG_FIELD(network.tanh)),
          K::float_key("network", "init_log_std", kAnyNumber, CONFIG_FIELD(network.init_log_std)),
          K::bool_key("network", "squash", CONFIG_FIELD(network.squash)),
          K::choice_key("optim", "name", {"sgd", "adam", "adamw"}, CONFIG_FIELD(optim.name)),
          K::float_key("optim", "lr", kPositive, CONFIG_FIELD(optim.lr)),
          K::float_key("optim", "momentum", kNonNegative, CONFIG_FIELD(optim.momentum)),
          K::float_key("optim", "weight_decay", kNonNegative, CONFIG_FIELD(optim.weight_decay)),
          K::float_key("optim", "beta1", config::kHalfOpenUnit, CONFIG_FIELD(optim.beta1)),
          K::float_key("optim", "beta2", config::kHalfOpenUnit, CONFIG_FIELD(optim.beta2)),
          K::float_key("optim", "eps", kPositive, CONFIG_FIELD(optim.eps)),
          K::choice_key("algo", "name", algorithm_names(), CONFIG_FIELD(algo.name)),
          K::float_key("algo", "gamma", kClosedUnit, CONFIG_FIELD(algo.gamma)),
          K::float_key("algo", "lambda", kClosedUnit, CONFIG_FIELD(algo.lambda)),
          K::int_key("algo", "unroll", 1, CONFIG_FIELD(algo.unroll)),
          K::int_key("algo", "epochs", 1, CONFIG_FIELD(algo.epochs)),
          K::int_key("algo", "minibatches", 1, CONFIG_FIELD(algo.minibatches)),
          K::float_key("algo", "clip", kNonNegative, CONFIG_FIELD(algo.clip)),
          K::float_key("algo", "value_clip", kNonNegative, CONFIG_FIELD(algo.value_clip)),
          K::float_key("algo", "entropy", kNonNegative, CONFIG_FIELD(algo.entropy)),
          K::float_key("algo", "value_coef", kNonNegative, CONFIG_FIELD(algo.value_coef)),
          K::float_key("algo", "max_grad_norm", kNonNegative, CONFIG_FIELD(algo.max_grad_norm)),
          K::bool_key("algo", "normalize_advantages", CONFIG_FIELD(algo.normalize_advantages)),
          K::bool_key("algo", "anneal_lr", CONFIG_FIELD(algo.anneal_lr)),
          K::float_key("algo", "target_kl", kNonNegative, CONFIG_FIELD(algo.target_kl)),
          K::bool_key("normalize", "observations", CONFIG_FIELD(normalize.observations)),
          K::bool_key("normalize", "rewards", CONFIG_FIELD(normalize.rewards)),
          K::float_key("normalize", "clip_observations", kPositive,
                       CONFIG_FIELD(normalize.clip_observations)),
          K::float_key("normalize", "clip_rewards", kPositive,
                       CONFIG_FIELD(normalize.clip_rewards)),
          K::int_key("impala", "batch_unrolls", 1, CONFIG_FIELD(impala.batch_unrolls)),
          K::float_key("impala", "clip_rho", kPositive, CONFIG_FIELD(impala.clip_rho)),
          K::float_key("impala", "clip_c", kPositive, CONFIG_FIELD(impala.clip_c)),
          K::float_key("impala", "clip_pg_rho", kPositive, CONFIG_FIELD(impala.clip_pg_rho)),
          K::int_key("impala", "max_unrolls_ahead", 1, CONFIG_FIELD(impala.max_unrolls_ahead)),
          K::int_key("impala", "solo_unrolls", 0, CONFIG_FIELD(impala.solo_unrolls)),
          K::int_key("apex", "n_step", 1, CONFIG_FIELD(apex.n_step)),
          K::float_key("apex", "epsilon", kClosedUnit, CONFIG_FIELD(apex.epsilon)),
          K::float_key("apex", "epsilon_alpha", kNonNegative, CONFIG_FIELD(apex.epsilon_alpha)),
          K::float_key("apex", "noise", kPositive, CONFIG_FIELD(apex.noise)),
          K::float_key("apex", "noise_min", kPositive, CONFIG_FIELD(apex.noise_min)),
          K::float_key("apex", "tau", config::Range{0, 1, true, false, "in (0, 1]"},
                       CONFIG_FIELD(apex.tau)),
          K::int_key("apex", "capacity", 1, CONFIG_FIELD(apex.capacity)),
          K::float_key("apex", "alpha", kNonNegative, CONFIG_FIELD(apex.alpha)),
          K::float_key("apex", "beta", kClosedUnit, CONFIG_FIELD(apex.beta)),
          K::int_key("apex", "batch_size", 1, CONFIG_FIELD(apex.batch_size)),
          K::int_key("apex", "learning_starts", 1, CONFIG_FIELD(apex.learning_starts)),
          K::int_key("apex", "target_update", 1, CONFIG_FIELD(apex.target_update)),
          K::int_key("apex", "param_push", 1, CONFIG_FIELD(apex.param_push)),
          K::int_key("apex", "actor_batch", 1, CONFIG_FIELD(apex.actor_batch)),
          K::int_key("apex", "env_steps_per_update", 0, CONFIG_FIELD(apex.env_steps_per_update)),
          K::int_key("run", "env_steps", 1, CONFIG_FIELD(run.env_steps)),
          K::int_key("run", "seed", 0, CONFIG_FIELD(run.seed)),
          K::int_key("run", "threads", 1, CONFIG_FIELD(run.threads)),
          K::int_key("run", "env_workers", 1, CONFIG_FIELD(run.env_workers)),
          K::int_key("run", "eval_episodes", 1, CONFIG_FIELD(run.eval_episodes)),
          target_key(),
          K::choice_key("run", "target_metric", {"eval", "train"}, CONFIG_FIELD(run.target_metric)),
          K::int_key("run", "eval_every", 0, CONFIG_FIELD(run.eval_every)),
          K::int_key("run", "eval_episodes_during", 1, CONFIG_FIELD(run.eval_episodes_during)),
          K::int_key("run", "log_every", 0, CONFIG_FIELD(run.log_every)),
          K::string_key("run", "checkpoint_dir", CONFIG_FIELD(run.checkpoint_dir)),
          K::int_key("run", "checkpoint_every", 0, CONFIG_FIELD(run.checkpoint_every)),
          K::string_key("run", "resume", CONFIG_FIELD(run.resume)),
          K::float_key("run", "timeout_s", kPositive, CONFIG_FIELD(run.timeout_s)),
          K::float_key("run", "stall_warn_s", kNonNegative, CONFIG_FIELD(run.stall_warn_s)),
          K::float_key("run", "actor_timeout_s", kPositive, CONFIG_FIELD(run.actor_timeout_s)),
          K::choice_key("run", "on_actor_loss", {"continue", "stop"},
                        CONFIG_FIELD(run.on_actor_loss)),
          K::int_key("run", "fault_actor", -1, CONFIG_FIELD(run.fault_actor)),
          K::int_key("run", "fault_after", 0, CONFIG_FIELD(run.fault_after)),
      },
      "run.env_steps");
  return s;
}

// 1 rather than 1.0 for the integer keys.
std::string show(double v) {
  return v == std::floor(v) ? cat(static_cast<long long>(v)) : config::format_float(v);
}

bool is_actor_critic(const std::string& algo) { return algo == "a2c" || algo == "a3c"; }

// What a2c and a3c are, as named: one pass over one minibatch, no clipping, n-step returns.
struct FixedKey {
  std::string key;
  double required, value;
};
std::vector<FixedKey> actor_critic_keys(const RlConfig& c) {
  return {{"algo.epochs", 1, static_cast<double>(c.algo.epochs)},
          {"algo.minibatches", 1, static_cast<double>(c.algo.minibatches)},
          {"algo.clip", 0, c.algo.clip},
          {"algo.lambda", 1, c.algo.lambda}};
}

bool is_apex(const std::string& algo) { return algo == "apex" || algo == "apex_dpg"; }

void resolve_defaults(RlConfig& c) {
  if (!env_exists(c.env.name))
    throw ConfigError(cat(c.origin("env.name"), ": unknown environment '", c.env.name,
                          "'; expected one of ", env_choices()));
  const std::string& algo = c.algo.name;
  const bool asynchronous = algo == "a3c" || algo == "impala";
  // Normalisation helps continuous control (CleanRL's PPO does it) and the asynchronous
  // actor-critics everywhere (without it neither gets off -200 on MountainCar: docs/rl.md);
  // Ape-X stores raw transitions.
  const bool normalize =
      (asynchronous || !env_spaces(c.env.name).action.is_discrete()) && !is_apex(algo);
  if (!c.given("normalize.observations")) c.normalize.observations = normalize;
  if (!c.given("normalize.rewards")) c.normalize.rewards = normalize;
  if (is_actor_critic(algo)) {
    if (!c.given("algo.epochs")) c.algo.epochs = 1;
    if (!c.given("algo.minibatches")) c.algo.minibatches = 1;
    if (!c.given("algo.clip")) c.algo.clip = 0;
    if (!c.given("algo.lambda")) c.algo.lambda = 1;
  }
  // Settings that learn every discrete classic-control task (docs/benchmarks.md): A3C's short
  // n-step unrolls at A2C's learning rate with the paper's entropy bonus (Mnih et al.: t_max 5,
  // lr 7e-4, beta 0.01) and its rate annealed to 0 over run.env_steps (MountainCar's last
  // swings need it); IMPALA's short unrolls, small batches and a small entropy bonus at a
  // constant rate (annealed, it did no better on MountainCar and Acrobot, and worse on CartPole
  // stopped at its target).
  auto fallback = [&c](const char* key, auto& field, auto value) {
    if (!c.given(key)) field = value;
  };
  if (algo == "a3c") {
    fallback("algo.anneal_lr", c.algo.anneal_lr, true);
    fallback("algo.unroll", c.algo.unroll, 5);
    fallback("optim.lr", c.optim.lr, 7e-4);
    fallback("algo.entropy", c.algo.entropy, 0.01);
  }
  if (algo == "impala") {
    fallback("algo.unroll", c.algo.unroll, 20);
    fallback("optim.lr", c.optim.lr, 1e-3);
    fallback("algo.entropy", c.algo.entropy, 0.001);
    fallback("impala.batch_unrolls", c.impala.batch_unrolls, 2);
    fallback("impala.max_unrolls_ahead", c.impala.max_unrolls_ahead, 4);
  }
}

void check_consistency(const RlConfig& c) {
  const std::string& algo = c.algo.name;
  if (is_actor_critic(algo))
    for (const FixedKey& k : actor_critic_keys(c))
      if (k.value != k.required)
        throw ConfigError(cat(c.origin(k.key), ": ", algo,
                              " is one pass over one minibatch without clipping, with n-step "
                              "returns, so ",
                              k.key, " must be ", show(k.required), ", got ", show(k.value),
                              " (for several passes or clipping, use ppo)"));
  if (c.algo.target_kl > 0 && algo != "ppo")
    throw ConfigError(cat(c.origin("algo.target_kl"), ": algo.target_kl stops the epochs of a ppo ",
                          "update early; ", algo, " has no epochs to stop (use ppo, or 0)"));
  const bool discrete = env_spaces(c.env.name).action.is_discrete();
  if (algo == "apex" && !discrete)
    throw ConfigError(cat(c.source, ": apex (DQN) needs discrete actions; env.name = '", c.env.name,
                          "' has continuous ones (use apex_dpg, ppo, a2c, a3c or impala)"));
  if (algo == "apex_dpg" && discrete)
    throw ConfigError(cat(c.source, ": apex_dpg needs continuous actions; env.name = '", c.env.name,
                          "' has discrete ones (use apex)"));
  if (is_apex(algo) && (c.normalize.observations || c.normalize.rewards)) {
    const std::string key =
        c.normalize.observations ? "normalize.observations" : "normalize.rewards";
    throw ConfigError(cat(c.origin(key), ": ", algo, " keeps raw transitions in its replay; ", key,
                          " = true is for ppo, a2c, a3c and impala"));
  }
  if (c.algo.minibatches > c.algo.unroll * c.env.copies)
    throw ConfigError(cat(c.source, ": algo.minibatches = ", c.algo.minibatches,
                          " is more than the ", c.algo.unroll * c.env.copies,
                          " samples of a rollout (algo.unroll x env.copies)"));
  if (c.run.env_workers > c.env.copies)
    throw ConfigError(cat(c.origin("run.env_workers"), ": run.env_workers = ", c.run.env_workers,
                          " is more than the ", c.env.copies,
                          " environment copies (env.copies) it would step"));
  if (algo == "impala" && c.impala.max_unrolls_ahead < c.impala.batch_unrolls)
    throw ConfigError(cat(c.source, ": impala.max_unrolls_ahead = ", c.impala.max_unrolls_ahead,
                          " is less than impala.batch_unrolls = ", c.impala.batch_unrolls,
                          ": one actor could never fill a batch"));
  if (c.apex.learning_starts > c.apex.capacity)
    throw ConfigError(cat(c.source, ": apex.learning_starts = ", c.apex.learning_starts,
                          " can never be reached with apex.capacity = ", c.apex.capacity));
  if (c.run.has_target && c.run.target_metric == "eval" && c.run.eval_every == 0)
    throw ConfigError(cat(c.origin("run.target_return"),
                          ": run.target_return needs run.eval_every > 0 (the run stops when an "
                          "evaluation reaches the target), or run.target_metric = \"train\""));
}

}  // namespace

RlConfig load_rl_config(const std::string& path, const std::vector<std::string>& overrides) {
  const std::string text = path.empty() ? std::string() : config::read_config_text(path);
  const std::string source = path.empty() ? "<defaults>" : path;
  std::vector<std::string> origins;
  RlConfig c = config::parse_with(schema(), text, source, overrides, &origins);
  c.source = source;
  c.origins = std::move(origins);
  resolve_defaults(c);
  check_consistency(c);
  return c;
}

std::string canonical_text(const RlConfig& config) { return schema().canonical_text(config); }

std::uint64_t fingerprint(const RlConfig& config) {
  const std::string text = canonical_text(config);
  Fnv1a h;
  h.mix(text.data(), text.size());
  return h.value();
}

namespace {

// The index of `key` in the schema (and in origins).
std::size_t key_index(const std::string& key) {
  const auto& keys = schema().keys();
  const auto at = static_cast<std::size_t>(std::find(keys.begin(), keys.end(), key) - keys.begin());
  DML_CHECK(at < keys.size(), "an unknown key: ", key);
  return at;
}

}  // namespace

bool RlConfig::given(const std::string& key) const {
  const std::size_t at = key_index(key);
  return at < origins.size() && !origins[at].empty();
}

std::string RlConfig::origin(const std::string& key) const {
  return given(key) ? origins[key_index(key)] : source;
}

std::string described_config(const RlConfig& config) {
  std::string text;
  const auto& specs = schema().specs();
  for (std::size_t i = 0; i < specs.size(); ++i) {
    const bool set = i < config.origins.size() && !config.origins[i].empty();
    std::string line = cat(specs[i].dotted(), " = ", specs[i].print(config));
    line.resize(std::max<std::size_t>(line.size() + 2, 48), ' ');
    text += cat(line, "# ", set ? config.origins[i] : "default", "\n");
  }
  return text;
}

}  // namespace distml::rl
