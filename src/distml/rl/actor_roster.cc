#include "distml/rl/actor_roster.h"

#include "distml/core/error.h"

namespace distml::rl {

ActorRoster::ActorRoster(comm::Communicator& comm, const std::vector<int>& actor_ranks,
                         Channel channel, const SizeCheck& check, const RlConfig& config,
                         const RunHooks& hooks)
    : config_(config), hooks_(hooks) {
  for (int rank : actor_ranks)
    members_[rank] = {std::make_unique<MessageListener>(comm, rank, channel, check), Clock::now()};
}

int ActorRoster::poll(const Handler& handler) {
  int handled = 0;
  std::vector<int> silent;
  for (int rank : live()) {  // a copy: the handler may remove members
    Member& member = members_.at(rank);
    while (member.listener->ready()) {
      member.last_heard = Clock::now();
      handler(rank, member.listener->take());
      ++handled;
      if (!members_.count(rank)) break;  // the handler removed it
    }
    if (members_.count(rank) && seconds_since(member.last_heard) > config_.run.actor_timeout_s)
      silent.push_back(rank);
  }
  for (int rank : silent) lose(rank, cat("sent nothing for ", config_.run.actor_timeout_s, " s"));
  return handled;
}

std::vector<int> ActorRoster::live() const {
  std::vector<int> out;
  for (const auto& [rank, member] : members_) out.push_back(rank);
  return out;
}

void ActorRoster::lose(int rank, const std::string& why) {
  if (!members_.count(rank)) return;
  members_.erase(rank);
  lost_.push_back(rank);
  const bool stop = config_.run.on_actor_loss == "stop";
  hooks_.event({{"event", "actor_lost"},
                {"rank", rank},
                {"reason", why},
                {"actors_left", members_.size()},
                {"action", stop ? "stop" : "continue"}});
  if (stop)
    throw CommError(cat("actor rank ", rank, " is lost: it ", why,
                        "; stopping because run.on_actor_loss = \"stop\""));
  if (members_.empty() && finished_ == 0)
    throw CommError(cat("actor rank ", rank, " is lost: it ", why, "; no actor is left"));
}

}  // namespace distml::rl
