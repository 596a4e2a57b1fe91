#include "distml/rl/run_monitor.h"

#include <cmath>
#include <limits>

#include "distml/core/preemption.h"
#include "distml/train/checkpoint_file.h"

namespace distml::rl {

std::string checkpoint_path(const std::string& dir) { return dir + "/rl_checkpoint.bin"; }

RunMonitor::RunMonitor(const RlConfig& config, const RunHooks& hooks, PolicySource greedy,
                       StateSource state, Evaluations evaluations)
    : config_(config),
      hooks_(hooks),
      greedy_(std::move(greedy)),
      state_(std::move(state)),
      evaluations_(evaluations) {}

RunMonitor::~RunMonitor() {
  if (pending_) pending_->result.wait();  // it reads the config and the environment
}

void RunMonitor::add_episodes(double return_sum, std::int64_t count) {
  if (count <= 0) return;
  recent_.emplace_back(return_sum, count);
  recent_sum_ += return_sum;
  recent_count_ += count;
  while (recent_count_ - recent_.front().second >= 100) {
    recent_sum_ -= recent_.front().first;
    recent_count_ -= recent_.front().second;
    recent_.pop_front();
  }
}

double RunMonitor::recent_return() const {
  return recent_count_ ? recent_sum_ / static_cast<double>(recent_count_)
                       : std::numeric_limits<double>::quiet_NaN();
}

nlohmann::json number_or_null(double v) { return std::isfinite(v) ? nlohmann::json(v) : nullptr; }

bool RunMonitor::after_update(std::int64_t update, std::int64_t env_steps, nlohmann::json fields) {
  const RunConfig& run = config_.run;
  hooks_.progress(env_steps, run.env_steps);
  if (run.log_every > 0 && update % run.log_every == 0) {
    nlohmann::json e = {{"event", "update"},
                        {"update", update},
                        {"env_steps", env_steps},
                        {"train_return", number_or_null(recent_return())},
                        {"env_steps_per_sec", env_steps / std::max(elapsed_s(), 1e-9)},
                        {"elapsed_s", elapsed_s()}};
    if (fields.is_object()) e.update(fields);
    hooks_.event(e);
  }
  collect_evaluation(/*wait=*/false);
  if (!solved_ && run.eval_every > 0 && update % run.eval_every == 0)
    start_evaluation(update, env_steps);
  // Over ~100 episodes, as the training return is usually judged (CleanRL, Gymnasium's
  // reward_threshold).
  if (!solved_ && run.has_target && run.target_metric == "train" && recent_count_ >= 100 &&
      recent_return() >= run.target_return)
    reached(env_steps, recent_return());
  if (!run.checkpoint_dir.empty() && run.checkpoint_every > 0 && update % run.checkpoint_every == 0)
    checkpoint(update, state_());
  // A preemption (core/preemption.h) stops the run as a reached target does, after this
  // update, where there is a checkpoint to go on from; finish() writes it.
  preempted_ =
      preempted_ || (!run.checkpoint_dir.empty() && preemption_caught() && preemption_requested());
  return solved_ || preempted_;
}

void RunMonitor::start_evaluation(std::int64_t update, std::int64_t env_steps) {
  const RunConfig& run = config_.run;
  const std::uint64_t seed = run.seed + 1000 * ++eval_round_;
  if (evaluations_ == Evaluations::inline_) {
    report_evaluation(update, env_steps,
                      evaluate(config_.env.name, run.eval_episodes_during, seed, greedy_(),
                               env_options(config_)));
    return;
  }
  if (pending_) return;  // the previous one is still running: this round is skipped
  pending_ =
      Pending{update, env_steps, std::async(std::launch::async, [this, seed, policy = greedy_()] {
                return evaluate(config_.env.name, config_.run.eval_episodes_during, seed, policy,
                                env_options(config_));
              })};
}

void RunMonitor::collect_evaluation(bool wait) {
  if (!pending_) return;
  if (!wait && pending_->result.wait_for(std::chrono::seconds(0)) != std::future_status::ready)
    return;
  Pending done = std::move(*pending_);
  pending_.reset();
  report_evaluation(done.update, done.env_steps, done.result.get());
}

void RunMonitor::report_evaluation(std::int64_t update, std::int64_t env_steps,
                                   const Evaluation& ev) {
  hooks_.event({{"event", "eval"},
                {"update", update},
                {"env_steps", env_steps},
                {"eval_mean_return", ev.mean_return},
                {"eval_episodes", ev.episodes},
                {"elapsed_s", elapsed_s()}});
  if (!solved_ && config_.run.has_target && config_.run.target_metric == "eval" &&
      ev.mean_return >= config_.run.target_return)
    reached(env_steps, ev.mean_return);
}

void RunMonitor::reached(std::int64_t env_steps, double value) {
  solved_ = true;
  solved_env_steps_ = env_steps;
  solved_s_ = elapsed_s();
  hooks_.event({{"event", "target"},
                {"metric", config_.run.target_metric},
                {"value", value},
                {"target_return", config_.run.target_return},
                {"env_steps", env_steps},
                {"elapsed_s", solved_s_}});
}

void RunMonitor::checkpoint(std::int64_t update, const std::string& payload) {
  const std::string path = checkpoint_path(config_.run.checkpoint_dir);
  train::write_checked_file(path, payload, this_run_id());
  hooks_.event({{"event", "checkpoint"}, {"update", update}, {"path", path}});
}

RunResult RunMonitor::finish(std::int64_t update, std::int64_t env_steps) {
  const double train_s = elapsed_s();
  collect_evaluation(/*wait=*/true);
  RunResult r;
  if (!config_.run.checkpoint_dir.empty()) checkpoint(update, state_());
  if (preempted_) {  // no time for the final evaluation: the machine is going away
    r.preempted = true;
    r.updates = update;
    r.env_steps = env_steps;
    return r;
  }
  const Evaluation ev = evaluate(config_.env.name, config_.run.eval_episodes, config_.run.seed,
                                 greedy_(), env_options(config_));
  r.eval_mean_return = ev.mean_return;
  r.eval_episodes = ev.episodes;
  r.env_steps = env_steps;
  r.env_steps_per_sec = env_steps / std::max(train_s, 1e-9);
  r.report["updates"] = update;
  r.report["train_s"] = train_s;
  r.report["train_return"] = number_or_null(recent_return());
  if (config_.run.has_target) {
    r.report["target_return"] = config_.run.target_return;
    r.report["target_metric"] = config_.run.target_metric;
    r.report["solved_at_env_steps"] = solved_ ? nlohmann::json(solved_env_steps_) : nullptr;
    r.report["solved_at_s"] = solved_ ? nlohmann::json(solved_s_) : nullptr;
  }
  return r;
}

}  // namespace distml::rl
