#include "distml/rl/parameter_sender.h"

namespace distml::rl {

bool ParameterSender::delivered(int rank) {
  auto it = in_flight_.find(rank);
  return it == in_flight_.end() || it->second.done();
}

bool ParameterSender::send(int rank, const std::vector<float>& flat, std::uint64_t version,
                           std::uint64_t counter) {
  if (!delivered(rank)) return false;
  in_flight_.erase(rank);
  in_flight_.emplace(rank, PendingSend(comm_, rank, Channel::from_learner,
                                       Message{MessageKind::parameters, version, counter, flat}));
  return true;
}

}  // namespace distml::rl
