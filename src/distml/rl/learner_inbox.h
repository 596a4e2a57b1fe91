// What an actor hears from its learner (rank 0): parameters (and the normaliser's shared
// statistics, policy_state.h), loaded into the actor's network as they arrive, with their version
// and the learner's counter for this actor; and `stop`. Every
// wait of an actor goes through here, so it keeps taking parameters while it waits and gives
// up with a TimeoutError when the learner falls silent.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <string>

#include "distml/rl/message.h"
#include "distml/rl/normalizer.h"

namespace distml::rl {

class LearnerInbox {
 public:
  /// Listens on Channel::from_learner for parameters of `net` and statistics of `normalizer`
  /// (null: none), or stop.
  LearnerInbox(comm::Communicator& comm, torch::nn::Module& net, Normalizer* normalizer = nullptr);

  /// Takes every message that has arrived; never blocks.
  void poll();
  /// Waits, taking messages, until `done()` or stop; TimeoutError("actor rank R: `what`")
  /// after the communicator's timeout.
  void wait_until(const std::function<bool()>& done, const std::string& what);
  /// Waits for `send` to rank `dst` to be delivered, taking messages meanwhile.
  void wait_for(PendingSend& send, int dst);

  bool stopped() const { return stopped_; }
  /// The learner's update count of the parameters the network holds (0: the initial ones).
  std::uint64_t version() const { return version_; }
  /// The counter the last parameters carried (IMPALA: this actor's unrolls consumed).
  std::uint64_t counter() const { return counter_; }

 private:
  void take(Message m);

  comm::Communicator& comm_;
  torch::nn::Module& net_;
  Normalizer* normalizer_;
  MessageListener listener_;
  bool stopped_ = false;
  std::uint64_t version_ = 0, counter_ = 0;
};

}  // namespace distml::rl
