#include "distml/comm/algorithms/context.h"

namespace distml::comm {

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
