// The learner's side of parameter refreshes: at most one copy in flight per actor. An actor
// whose previous copy is still undelivered is behind and is skipped; a later send catches it up.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "distml/rl/message.h"

namespace distml::rl {

class ParameterSender {
 public:
  explicit ParameterSender(comm::Communicator& comm) : comm_(comm) {}
  /// True when actor `rank` has taken every copy sent to it.
  bool delivered(int rank);
  /// Sends `flat` (with the learner's `version` and a per-actor `counter`) to `rank` unless its
  /// previous copy is undelivered; true when it sent.
  bool send(int rank, const std::vector<float>& flat, std::uint64_t version,
            std::uint64_t counter = 0);

 private:
  comm::Communicator& comm_;
  std::map<int, PendingSend> in_flight_;
};

}  // namespace distml::rl
