// What a collective algorithm sees of the world: its rank, the world size, point-to-point
// transfers on the collective channel, one deadline, and a reusable scratch buffer.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "distml/comm/block_range.h"
#include "distml/comm/engine.h"

namespace distml::comm {

class AlgoContext {
 public:
  /// `what` names the operation in error messages; it is built only when one is thrown,
  /// so that small collectives do not pay for formatting.
  AlgoContext(Engine& engine, Deadline deadline, std::function<std::string()> what,
              std::vector<std::byte>& scratch)
      : engine_(engine), deadline_(deadline), what_(std::move(what)), scratch_(scratch) {}
  AlgoContext(Engine& engine, Deadline deadline, std::string what, std::vector<std::byte>& scratch)
      : AlgoContext(
            engine, deadline, [w = std::move(what)] { return w; }, scratch) {}

  /// This context as seen by a group of ranks (`members`, world ranks in the group's order;
  /// this rank among them): rank() and size() count within the group, and transfers address
  /// group ranks. Algorithms written for the world run unchanged on a group.
  AlgoContext group(std::vector<int> members) const;

  int rank() const { return members_.empty() ? engine_.rank() : group_rank_; }
  int size() const { return members_.empty() ? engine_.size() : static_cast<int>(members_.size()); }
  Deadline deadline() const { return deadline_; }
  std::string what() const { return what_(); }

  RequestPtr isend(const void* data, std::size_t bytes, int dst, int tag) {
    return engine_.isend(Channel::collective, data, bytes, world_rank(dst), tag);
  }
  RequestPtr irecv(void* data, std::size_t bytes, int src, int tag) {
    return engine_.irecv(Channel::collective, data, bytes, world_rank(src), tag);
  }
  /// Waits for `request`; throws TimeoutError naming it at the deadline.
  void wait(RequestPtr& request);
  void wait_all(std::vector<RequestPtr>& requests);
  /// Sends to `dst` and receives from `src` at the same time (both may be the same rank).
  void sendrecv(const void* send, std::size_t send_bytes, int dst, void* recv,
                std::size_t recv_bytes, int src, int tag);

  /// A buffer of at least `bytes` bytes, valid until the next call. Reused across calls.
  std::byte* scratch(std::size_t bytes);

 private:
  int world_rank(int r) const { return members_.empty() ? r : members_[r]; }

  Engine& engine_;
  Deadline deadline_;
  std::function<std::string()> what_;
  std::vector<std::byte>& scratch_;
  std::vector<int> members_;  // empty: the whole world
  int group_rank_ = 0;
};

}  // namespace distml::comm
