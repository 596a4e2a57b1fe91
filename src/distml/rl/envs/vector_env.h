// K copies of one environment stepped together, as an actor runs them: every copy whose
// episode ends is reset at once, so a step always returns one observation per copy.
//
// With several workers the copies step on that many threads, and they form two groups (the
// first and the second half of the copies) that step apart: while one group steps, the caller
// computes the other's actions. This is Sample Factory's double buffering; collect_rollout
// uses it. Whatever the workers, each copy sees the same actions and seeds and so the same
// trajectory, and finished episodes are listed in the same order (by step, then copy).
#pragma once

#include <cstdint>
#include <future>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "distml/rl/envs/env.h"

namespace thread_pool {
class ThreadPool;
}

namespace distml::rl {

class VectorEnv {
 public:
  /// `copies` environments called `name`. Copy c's e-th episode starts from a seed derived
  /// from (seed, c, e) alone, so a run is reproducible and copies never share a start. A copy
  /// that fails (throws from reset or step) is an EnvError naming the environment, the copy,
  /// the episode and the step.
  /// `workers` > 1: threads that step the copies (see above).
  VectorEnv(std::string_view name, int copies, std::uint64_t seed, const EnvOptions& options = {},
            int workers = 1);
  ~VectorEnv();

  int copies() const { return static_cast<int>(envs_.size()); }
  const Space& observation_space() const { return envs_[0]->observation_space(); }
  const Space& action_space() const { return envs_[0]->action_space(); }
  int observation_size() const { return observation_space().size(); }

  /// The current observation of every copy, row-major [copies x observation_size()].
  const std::vector<float>& observations() const { return observations_; }

  struct Step {
    std::vector<float> rewards;            // [copies]
    std::vector<std::uint8_t> terminated;  // [copies], 1 when the task ended
    std::vector<std::uint8_t> truncated;   // [copies], 1 when the time limit cut it
    /// [copies x observation_size()]: for a copy whose episode ended, the observation it ended
    /// on (to bootstrap a truncated episode); otherwise the same as observations().
    std::vector<float> final_observations;
  };
  /// Steps every copy; `actions` is row-major [copies x action_space().size()]. Copies whose
  /// episode ended are reset, and observations() then holds their new first observation.
  const Step& step(std::span<const float> actions);

  /// The groups that step apart: two with several workers and copies, else one of every copy.
  int groups() const { return static_cast<int>(in_flight_.size()); }
  struct Group {
    int first, count;  // copies [first, first + count)
  };
  Group group(int g) const;
  /// Starts stepping group g with its copies' actions (row-major [count x action size]); on
  /// the workers it returns at once, with one worker it steps them here.
  void start_step(int g, std::span<const float> actions);
  /// Waits for group g's step. step()'s results and observations() are then current for its
  /// copies; the other group's rows may still be changing. A copy that failed is rethrown
  /// here once no worker is busy.
  const Step& finish_step(int g);

  /// Undiscounted returns and lengths of the episodes that ended since the last call.
  struct Finished {
    std::vector<double> returns;
    std::vector<std::int64_t> lengths;
  };
  Finished take_finished();

  /// Environment steps taken by all copies together.
  std::int64_t steps() const { return steps_; }

 private:
  void reset_copy(int c);
  void step_copy(int c);  // on a worker: touches copy c's own state and rows alone
  void drain();           // waits for every task in flight, whatever its outcome
  // EnvError unless `observation` has observation_size() floats.
  void check_observation(const std::vector<float>& observation) const;
  // "copy c, WHAT of episode e", for errors.
  std::string where(int c, const char* what) const;

  std::vector<std::unique_ptr<Env>> envs_;
  std::uint64_t seed_;
  std::vector<std::uint64_t> episodes_;  // per copy: episodes started
  std::vector<double> running_return_;
  std::vector<std::int64_t> running_length_;
  std::vector<double> ended_return_;        // per copy: of the episode its last step ended
  std::vector<std::int64_t> ended_length_;  // ... and its length
  std::vector<float> observations_;
  std::vector<float> actions_;  // the actions being stepped, [copies x action size]
  Step step_;
  Finished finished_;
  std::int64_t steps_ = 0;
  std::vector<std::vector<std::future<void>>> in_flight_;  // per group: its workers' tasks
  // Last, so that it is destroyed first: its threads finish their tasks, which use the above.
  std::unique_ptr<thread_pool::ThreadPool> workers_;
};

}  // namespace distml::rl
