// What an actor does between its environments and its network when [normalize] asks for it, as
// CleanRL's ppo_continuous_action does with Gymnasium's wrappers: each observation minus the
// running mean, over the running standard deviation, clipped to +-normalize.clip_observations;
// each reward over the running standard deviation of the discounted return, clipped to
// +-normalize.clip_rewards.
//
// The statistics have two parts: `shared`, the same on every rank, and `pending`, the rows this
// actor has seen since it last handed them on. The actor normalises with shared and pending
// merged, as one process would with every row it has seen. Handing on:
//  - synchronous ranks (PPO, A2C) call sync(): every rank's pending part is gathered and merged
//    into shared in rank order, so that shared stays identical on every rank;
//  - asynchronous actors (A3C, IMPALA) send take_pending() with their data; the learner merges
//    it (merge_pending) and sends shared_state() back with the parameters (set_shared).
// Evaluation and checkpoints use shared_state().
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "distml/comm/communicator.h"
#include "distml/rl/running_stats.h"

namespace distml::rl {

struct NormalizeConfig {
  bool observations = false;
  bool rewards = false;
  double clip_observations = 10;
  double clip_rewards = 10;
  double epsilon = 1e-8;  // added to the variance before the square root
};

class Normalizer {
 public:
  /// For `copies` environment copies with observations of `observation_size` floats, whose
  /// discounted returns use `gamma`.
  Normalizer(const NormalizeConfig& config, int observation_size, int copies, double gamma);

  bool normalizes_observations() const { return config_.observations; }
  bool scales_rewards() const { return config_.rewards; }

  /// Rows the policy is about to act on: counted, then normalised in place.
  void observe(std::span<float> rows);
  /// Normalises rows in place without counting them (a final observation, evaluation).
  void normalize(std::span<float> rows) const;
  /// Scales one step's reward of copies [first_copy, first_copy + rewards.size()) in place; a
  /// copy whose episode `ended` starts a new discounted return.
  void scale_rewards(std::span<float> rewards, std::span<const std::uint8_t> ended,
                     int first_copy = 0);

  /// Synchronous ranks: merges every rank's pending statistics into shared, in rank order.
  void sync(comm::Communicator& comm);
  /// Asynchronous actors: the pending statistics, packed, and cleared here.
  std::vector<double> take_pending();
  /// The learner: merges an actor's take_pending() into shared. Error if it does not fit.
  void merge_pending(std::span<const double> packed);
  /// The shared statistics, packed (empty when nothing is normalised).
  std::vector<double> shared_state() const;
  /// Replaces the shared statistics (an actor taking the learner's, or a checkpoint); pending
  /// rows are kept. Error if `packed` does not fit.
  void set_shared(std::span<const double> packed);
  /// Floats of shared_state() and take_pending().
  std::size_t packed_size() const;

 private:
  struct Part {  // statistics of one quantity
    RunningMeanStd shared, pending;
    std::vector<double> mean, inv_std;  // of shared and pending merged
    void refresh(double epsilon);
  };
  // The parts in use, in packed order (observations, then returns).
  template <class Self>
  static auto parts_of(Self& self);

  NormalizeConfig config_;
  double gamma_;
  Part observations_, returns_;
  std::vector<double> discounted_;  // per copy: the running discounted return
};

}  // namespace distml::rl
