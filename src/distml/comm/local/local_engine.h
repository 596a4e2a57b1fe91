// Shared state of one in-process group and the Engine over it. Private to comm/local/.
#pragma once

#include <condition_variable>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "distml/comm/engine.h"

namespace distml::comm::local {

struct Transfer;  // one posted send or receive

/// Posted, unmatched transfers addressed to one rank on one channel.
struct Mailbox {
  std::mutex mutex;
  std::list<std::shared_ptr<Transfer>> sends, recvs;
};

/// What each rank publishes when it enters a native collective.
struct Slot {
  const void* in = nullptr;
  void* out = nullptr;
  std::size_t count = 0;
  std::size_t extra = 0;  // root, or the element offset of this rank's block
  DType dtype = DType::f32;
  int kind = 0;
  int op = 0;
};

struct Group {
  explicit Group(int n);
  int size;
  std::vector<Mailbox> mailboxes;  // [dst * 2 + channel]

  // A reusable barrier that records who has arrived, for the native collectives.
  std::mutex mutex;
  std::condition_variable cv;
  std::uint64_t generation = 0;
  std::vector<char> arrived;
  int arrived_count = 0;
  std::vector<Slot> slots;

  // Sub-groups created by split, by (split id, color); the first member to get there builds it.
  std::map<std::pair<std::uint64_t, int>, std::shared_ptr<Group>> children;

  /// Waits until every rank has arrived; throws TimeoutError naming the ranks that did not.
  void arrive_and_wait(int rank, Deadline deadline, const char* what);
};

class LocalEngine final : public Engine {
 public:
  LocalEngine(std::shared_ptr<Group> group, int rank) : group_(std::move(group)), rank_(rank) {}
  std::string_view name() const override { return "local"; }
  int rank() const override { return rank_; }
  int size() const override { return group_->size; }

  RequestPtr isend(Channel ch, const void* data, std::size_t bytes, int dst, int tag) override;
  RequestPtr irecv(Channel ch, void* data, std::size_t bytes, int src, int tag) override;

  void allreduce(Buffer data, ReduceOp op, Deadline deadline) override;
  void broadcast(Buffer data, int root, Deadline deadline) override;
  void allgather(ConstBuffer in, Buffer out, Deadline deadline) override;
  void allgatherv(ConstBuffer in, Buffer out, std::span<const std::size_t> counts,
                  Deadline deadline) override;
  void reduce_scatter(ConstBuffer in, Buffer out, ReduceOp op, Deadline deadline) override;
  void alltoall(ConstBuffer in, Buffer out, Deadline deadline) override;
  void barrier(Deadline deadline) override;
  std::unique_ptr<Engine> split(const SplitGroup& group, Deadline deadline) override;

 private:
  /// Publishes this rank's slot, waits for all, and checks that they describe the same call.
  const std::vector<Slot>& enter(const Slot& mine, Deadline deadline, const char* what);
  void leave(Deadline deadline, const char* what);

  std::shared_ptr<Group> group_;
  int rank_;
};

}  // namespace distml::comm::local
