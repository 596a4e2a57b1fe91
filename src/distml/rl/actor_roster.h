// A learner's (or replay's) view of its actors: one message listener each, when each was last
// heard from, and what happens when one goes silent. An actor that sends nothing for
// run.actor_timeout_s is reported by rank ({"event": "actor_lost"}); with run.on_actor_loss =
// "continue" the run goes on with the others, with "stop" it ends with a CommError naming the
// rank. Either way nothing waits on the lost actor again.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "distml/core/clock.h"
#include "distml/rl/algos/algorithm.h"
#include "distml/rl/message.h"

namespace distml::rl {

class ActorRoster {
 public:
  ActorRoster(comm::Communicator& comm, const std::vector<int>& actor_ranks, Channel channel,
              const SizeCheck& check, const RlConfig& config, const RunHooks& hooks);

  using Handler = std::function<void(int rank, Message message)>;
  /// Hands every message that has arrived to `handler`; then reports actors silent for too
  /// long. Never blocks. Returns the number of messages handled.
  int poll(const Handler& handler);
  /// Actors still taking part, in rank order.
  std::vector<int> live() const;
  std::vector<int> lost() const { return lost_; }
  bool is_live(int rank) const { return members_.count(rank) > 0; }
  /// Takes `rank` out once it said goodbye (the run is ending): no more polling of it.
  void remove(int rank) { finished_ += members_.erase(rank); }
  /// Reports `rank` lost because of `why`; throws under on_actor_loss = "stop", or when no
  /// actor is left while the run still needs them (none has said goodbye yet).
  void lose(int rank, const std::string& why);

 private:
  struct Member {
    std::unique_ptr<MessageListener> listener;
    Clock::time_point last_heard;
  };
  const RlConfig& config_;
  const RunHooks& hooks_;
  std::map<int, Member> members_;
  std::vector<int> lost_;
  std::size_t finished_ = 0;  // actors that said goodbye
};

}  // namespace distml::rl
