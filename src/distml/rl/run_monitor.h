// What the learner of every algorithm does between updates: progress lines, evaluation
// during the run (stopping once the target return is reached), checkpoints, and the final
// evaluation that the done line reports.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <string>

#include "distml/core/clock.h"
#include "distml/rl/algos/algorithm.h"
#include "distml/rl/evaluation.h"

namespace distml::rl {

class RunMonitor {
 public:
  RunMonitor(const RlConfig& config, const RunHooks& hooks);

  /// Training episodes that ended (their return sum and count).
  void add_episodes(double return_sum, std::int64_t count);
  /// The mean return of the last ~100 training episodes (NaN before the first).
  double recent_return() const;

  /// After learner update `update` (1-based) with `env_steps` taken so far: a progress line
  /// every run.log_every updates (with `fields`), an evaluation every run.eval_every, a
  /// checkpoint every run.checkpoint_every (`state` gives its payload). True once an
  /// evaluation reached run.target_return.
  bool after_update(std::int64_t update, std::int64_t env_steps, const Policy& greedy,
                    const std::function<std::string()>& state, nlohmann::json fields = {});

  /// The final evaluation and checkpoint; the result of the run.
  RunResult finish(std::int64_t update, std::int64_t env_steps, const Policy& greedy,
                   const std::function<std::string()>& state);

  double elapsed_s() const { return seconds_since(start_); }

 private:
  void checkpoint(std::int64_t update, const std::string& payload);

  const RlConfig& config_;
  const RunHooks& hooks_;
  Clock::time_point start_ = Clock::now();
  std::deque<std::pair<double, std::int64_t>> recent_;  // (return sum, episodes) per report
  std::int64_t recent_count_ = 0;
  double recent_sum_ = 0;
  bool solved_ = false;
  std::int64_t solved_env_steps_ = 0;
  double solved_s_ = 0;
  std::uint64_t eval_round_ = 0;
};

/// Path of the checkpoint file in `dir`.
std::string checkpoint_path(const std::string& dir);

}  // namespace distml::rl
