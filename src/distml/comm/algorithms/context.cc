#include "distml/comm/algorithms/context.h"

#include <algorithm>

#include "distml/core/error.h"

namespace distml::comm {

AlgoContext AlgoContext::group(std::vector<int> members) const {
  AlgoContext g(*this);
  const int me = engine_.rank();
  const auto it = std::find(members.begin(), members.end(), me);
  DML_CHECK(it != members.end(), "rank ", me, " is not in the group it runs in");
  g.group_rank_ = static_cast<int>(it - members.begin());
  g.members_ = std::move(members);
  return g;
}

void AlgoContext::wait(RequestPtr& request) {
  if (request && !request->wait_until(deadline_))
    throw TimeoutError(cat(what_(), ": timed out in ", request->describe()));
}

void AlgoContext::wait_all(std::vector<RequestPtr>& requests) {
  for (auto& r : requests) wait(r);
  requests.clear();
}

void AlgoContext::sendrecv(const void* send, std::size_t send_bytes, int dst, void* recv,
                           std::size_t recv_bytes, int src, int tag) {
  auto r = irecv(recv, recv_bytes, src, tag);
  auto s = isend(send, send_bytes, dst, tag);
  wait(r);
  wait(s);
}

std::byte* AlgoContext::scratch(std::size_t bytes) {
  if (scratch_.size() < bytes) scratch_.resize(bytes);
  return scratch_.data();
}

}  // namespace distml::comm
