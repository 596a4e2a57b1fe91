// What the learner of every algorithm does between updates: progress lines, evaluation
// during the run, stopping once the target return is reached, checkpoints, and the final
// evaluation that the done line reports.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <future>
#include <optional>
#include <string>

#include "distml/core/clock.h"
#include "distml/rl/algos/algorithm.h"
#include "distml/rl/evaluation.h"

namespace distml::rl {

class RunMonitor {
 public:
  /// The greedy policy to evaluate, made when an evaluation starts.
  using PolicySource = std::function<Policy()>;
  /// The learner's state as a checkpoint payload.
  using StateSource = std::function<std::string()>;
  /// Where evaluations during the run run: in the learner's thread between updates, or beside
  /// it in a thread of their own, so that the learner keeps serving its actors (A3C). Beside,
  /// `greedy` must return a policy that owns a snapshot of the networks.
  enum class Evaluations { inline_, beside };

  RunMonitor(const RlConfig& config, const RunHooks& hooks, PolicySource greedy, StateSource state,
             Evaluations evaluations = Evaluations::inline_);
  ~RunMonitor();

  /// Training episodes that ended (their return sum and count).
  void add_episodes(double return_sum, std::int64_t count);
  /// The mean return of the last ~100 training episodes (NaN before the first).
  double recent_return() const;

  /// After learner update `update` (1-based) with `env_steps` taken so far: a progress line
  /// every run.log_every updates (with `fields`), an evaluation every run.eval_every, a
  /// checkpoint every run.checkpoint_every. True once the target return is reached
  /// (run.target_return, by run.target_metric), which it reports once as a "target" event.
  bool after_update(std::int64_t update, std::int64_t env_steps, nlohmann::json fields = {});

  /// The final evaluation and checkpoint; the result of the run.
  RunResult finish(std::int64_t update, std::int64_t env_steps);

  double elapsed_s() const { return seconds_since(start_); }

 private:
  struct Pending {  // an evaluation running beside the learner
    std::int64_t update, env_steps;
    std::future<Evaluation> result;
  };
  void checkpoint(std::int64_t update, const std::string& payload);
  void start_evaluation(std::int64_t update, std::int64_t env_steps);
  void report_evaluation(std::int64_t update, std::int64_t env_steps, const Evaluation& ev);
  void collect_evaluation(bool wait);
  void reached(std::int64_t env_steps, double value);

  const RlConfig& config_;
  const RunHooks& hooks_;
  PolicySource greedy_;
  StateSource state_;
  Evaluations evaluations_;
  Clock::time_point start_ = Clock::now();
  std::deque<std::pair<double, std::int64_t>> recent_;  // (return sum, episodes) per report
  std::int64_t recent_count_ = 0;
  double recent_sum_ = 0;
  bool solved_ = false;
  bool preempted_ = false;  // SIGTERM or SIGUSR1 came (core/preemption.h)
  std::int64_t solved_env_steps_ = 0;
  double solved_s_ = 0;
  std::uint64_t eval_round_ = 0;
  std::optional<Pending> pending_;
};

/// `v` as a JSON number, or null where it is NaN or infinite (which JSON cannot hold).
nlohmann::json number_or_null(double v);

/// Path of the checkpoint file in `dir`.
std::string checkpoint_path(const std::string& dir);

}  // namespace distml::rl
