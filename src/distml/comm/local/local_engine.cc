#include "distml/comm/local/local_engine.h"

#include <algorithm>
#include <cstring>
#include <numeric>

#include "distml/comm/block_range.h"
#include "distml/comm/reduce.h"

namespace distml::comm::local {

struct Transfer {
  const void* send_data = nullptr;
  std::vector<std::byte> eager;  // a small send's own copy, so that it completes at once
  bool is_eager = false;
  void* recv_data = nullptr;
  std::size_t bytes = 0;
  int src = 0, dst = 0, tag = 0;
  std::mutex mutex;
  std::condition_variable cv;
  bool done = false;
  std::string error;

  void finish(std::string why = {}) {
    {
      std::lock_guard lock(mutex);
      done = true;
      error = std::move(why);
    }
    cv.notify_all();
  }
};

namespace {

// Copies a matched pair under the mailbox lock, or fails both ends if the sizes differ.
void complete(Transfer& send, Transfer& recv) {
  if (send.bytes != recv.bytes) {
    std::string why = size_mismatch(send.src, send.tag, recv.bytes, send.bytes).what();
    recv.finish(why);
    if (!send.is_eager) send.finish(why);
    return;
  }
  if (send.bytes) std::memcpy(recv.recv_data, send.send_data, send.bytes);
  recv.finish();
  if (!send.is_eager) send.finish();
}

// Sends up to this size are copied and complete at once, as MPI's eager protocol does;
// larger ones wait for the receiver, who copies straight from the sender's buffer.
constexpr std::size_t kEagerBytes = 64 << 10;

class LocalRequest final : public Request {
 public:
  LocalRequest(std::shared_ptr<Transfer> t, Mailbox& box, bool is_send)
      : t_(std::move(t)), box_(box), is_send_(is_send) {}

  // An unmatched transfer is withdrawn, so that nobody writes into a dead buffer later.
  ~LocalRequest() override {
    if (t_->is_eager) return;  // delivered later from its own copy
    std::lock_guard lock(box_.mutex);
    auto& list = is_send_ ? box_.sends : box_.recvs;
    list.remove(t_);
  }

  bool test() override {
    std::lock_guard lock(t_->mutex);
    if (t_->done && !t_->error.empty()) throw CommError(t_->error);
    return t_->done;
  }

  bool wait_until(Deadline deadline) override {
    std::unique_lock lock(t_->mutex);
    if (!t_->cv.wait_until(lock, deadline.at, [&] { return t_->done; })) return false;
    if (!t_->error.empty()) throw CommError(t_->error);
    return true;
  }

  std::string describe() const override {
    return describe_transfer(is_send_, is_send_ ? t_->dst : t_->src, t_->tag, t_->bytes);
  }

 private:
  std::shared_ptr<Transfer> t_;
  Mailbox& box_;
  bool is_send_;
};

enum SlotKind { kAllreduce, kBroadcast, kAllgather, kAllgatherv, kReduceScatter, kAlltoall };
constexpr const char* kSlotNames[] = {"allreduce",  "broadcast",      "allgather",
                                      "allgatherv", "reduce_scatter", "alltoall"};

}  // namespace

Group::Group(int n) : size(n), mailboxes(2 * n), arrived(n, 0), slots(n) {}

void Group::arrive_and_wait(int rank, Deadline deadline, const char* what) {
  std::unique_lock lock(mutex);
  const std::uint64_t gen = generation;
  arrived[rank] = 1;
  if (++arrived_count == size) {
    arrived_count = 0;
    std::fill(arrived.begin(), arrived.end(), 0);
    ++generation;
    cv.notify_all();
    return;
  }
  if (!cv.wait_until(lock, deadline.at, [&] { return generation != gen; })) {
    std::string missing;
    for (int r = 0; r < size; ++r)
      if (!arrived[r]) missing += cat(missing.empty() ? "" : ", ", r);
    throw TimeoutError(cat(what, " (local engine): ranks that did not arrive: ", missing));
  }
}

namespace {

std::shared_ptr<Transfer> make_transfer(int src, int dst, int tag, std::size_t bytes) {
  auto t = std::make_shared<Transfer>();
  t->src = src;
  t->dst = dst;
  t->tag = tag;
  t->bytes = bytes;
  return t;
}

// Removes and returns the oldest posted transfer from `src` with `tag`, or null.
std::shared_ptr<Transfer> take_match(std::list<std::shared_ptr<Transfer>>& posted, int src,
                                     int tag) {
  auto it = std::find_if(posted.begin(), posted.end(),
                         [&](auto& t) { return t->src == src && t->tag == tag; });
  if (it == posted.end()) return nullptr;
  auto t = *it;
  posted.erase(it);
  return t;
}

}  // namespace

RequestPtr LocalEngine::isend(Channel ch, const void* data, std::size_t bytes, int dst, int tag) {
  auto t = make_transfer(rank_, dst, tag, bytes);
  t->send_data = data;
  Mailbox& box = group_->mailboxes[dst * 2 + static_cast<int>(ch)];
  std::lock_guard lock(box.mutex);
  if (auto recv = take_match(box.recvs, rank_, tag)) {
    complete(*t, *recv);
  } else {
    if (bytes <= kEagerBytes) {
      auto* p = static_cast<const std::byte*>(data);
      t->eager.assign(p, p + bytes);
      t->send_data = t->eager.data();
      t->is_eager = true;
      t->finish();
    }
    box.sends.push_back(t);
  }
  return std::make_unique<LocalRequest>(t, box, true);
}

RequestPtr LocalEngine::irecv(Channel ch, void* data, std::size_t bytes, int src, int tag) {
  auto t = make_transfer(src, rank_, tag, bytes);
  t->recv_data = data;
  Mailbox& box = group_->mailboxes[rank_ * 2 + static_cast<int>(ch)];
  std::lock_guard lock(box.mutex);
  if (auto send = take_match(box.sends, src, tag))
    complete(*send, *t);
  else
    box.recvs.push_back(t);
  return std::make_unique<LocalRequest>(t, box, false);
}

const std::vector<Slot>& LocalEngine::enter(const Slot& mine, Deadline deadline, const char* what) {
  {
    std::lock_guard lock(group_->mutex);
    group_->slots[rank_] = mine;
  }
  group_->arrive_and_wait(rank_, deadline, what);
  for (int r = 0; r < size(); ++r) {
    const Slot& s = group_->slots[r];
    std::string diff;
    if (s.kind != mine.kind)
      diff = cat("rank ", r, " called ", kSlotNames[s.kind]);
    else if (s.dtype != mine.dtype)
      diff = cat("rank ", r, " passed dtype ", dtype_name(s.dtype));
    else if (s.op != mine.op)
      diff = cat("rank ", r, " passed a different reduce op");
    else if (s.kind != kAllgatherv && s.count != mine.count)
      diff = cat("rank ", r, " passed ", s.count, " elements");
    else if (s.kind == kBroadcast && s.extra != mine.extra)
      diff = cat("rank ", r, " passed root ", s.extra);
    if (!diff.empty())
      throw CommError(cat(what, ": ranks disagree: rank ", rank_, " passed ", mine.count,
                          " elements of ", dtype_name(mine.dtype), ", but ", diff));
  }
  return group_->slots;
}

void LocalEngine::leave(Deadline deadline, const char* what) {
  group_->arrive_and_wait(rank_, deadline, what);
}

// Rank r reduces block r from every peer into its own buffer, then copies the finished
// blocks of the others: each block is reduced once, in one order, so all ranks agree bitwise.
void LocalEngine::allreduce(Buffer data, ReduceOp op, Deadline deadline) {
  const auto& slots =
      enter({data.data, data.data, data.count, 0, data.dtype, kAllreduce, static_cast<int>(op)},
            deadline, "allreduce");
  const std::size_t es = dtype_size(data.dtype);
  auto at = [&](const Slot& s, BlockRange b) {
    return static_cast<std::byte*>(s.out) + b.begin * es;
  };
  const BlockRange mine{block_range(data.count, size(), rank_)};
  for (int q = 0; q < size(); ++q)
    if (q != rank_)
      reduce_into(at(slots[rank_], mine), at(slots[q], mine), mine.size(), data.dtype, op);
  leave(deadline, "allreduce");
  for (int q = 0; q < size(); ++q) {
    if (q == rank_) continue;
    BlockRange b = block_range(data.count, size(), q);
    std::memcpy(at(slots[rank_], b), at(slots[q], b), b.size() * es);
  }
  leave(deadline, "allreduce");
}

void LocalEngine::broadcast(Buffer data, int root, Deadline deadline) {
  const auto& slots = enter(
      {data.data, data.data, data.count, static_cast<std::size_t>(root), data.dtype, kBroadcast, 0},
      deadline, "broadcast");
  if (rank_ != root && data.count) std::memcpy(data.data, slots[root].in, data.bytes());
  leave(deadline, "broadcast");
}

void LocalEngine::allgather(ConstBuffer in, Buffer out, Deadline deadline) {
  const auto& slots =
      enter({in.data, out.data, in.count, 0, in.dtype, kAllgather, 0}, deadline, "allgather");
  auto* dst = static_cast<std::byte*>(out.data);
  for (int q = 0; q < size(); ++q)
    if (in.count) std::memcpy(dst + q * in.bytes(), slots[q].in, in.bytes());
  leave(deadline, "allgather");
}

void LocalEngine::allgatherv(ConstBuffer in, Buffer out, std::span<const std::size_t> counts,
                             Deadline deadline) {
  const auto& slots =
      enter({in.data, out.data, in.count, 0, in.dtype, kAllgatherv, 0}, deadline, "allgatherv");
  const std::size_t es = dtype_size(in.dtype);
  std::size_t offset = 0;
  for (int q = 0; q < size(); ++q) {
    if (slots[q].count != counts[q])
      throw CommError(cat("allgatherv: rank ", q, " passed ", slots[q].count, " elements but rank ",
                          rank_, " expects ", counts[q], " from it"));
    if (counts[q])
      std::memcpy(static_cast<std::byte*>(out.data) + offset * es, slots[q].in, counts[q] * es);
    offset += counts[q];
  }
  leave(deadline, "allgatherv");
}

void LocalEngine::reduce_scatter(ConstBuffer in, Buffer out, ReduceOp op, Deadline deadline) {
  const auto& slots =
      enter({in.data, out.data, out.count, 0, in.dtype, kReduceScatter, static_cast<int>(op)},
            deadline, "reduce_scatter");
  const std::size_t block = out.bytes();
  if (block) {
    auto src = [&](int q) { return static_cast<const std::byte*>(slots[q].in) + rank_ * block; };
    std::memcpy(out.data, src(0), block);
    for (int q = 1; q < size(); ++q) reduce_into(out.data, src(q), out.count, out.dtype, op);
  }
  leave(deadline, "reduce_scatter");
}

void LocalEngine::alltoall(ConstBuffer in, Buffer out, Deadline deadline) {
  const auto& slots =
      enter({in.data, out.data, in.count, 0, in.dtype, kAlltoall, 0}, deadline, "alltoall");
  const std::size_t block = in.bytes() / size();
  for (int q = 0; q < size(); ++q)
    if (block)
      std::memcpy(static_cast<std::byte*>(out.data) + q * block,
                  static_cast<const std::byte*>(slots[q].in) + rank_ * block, block);
  leave(deadline, "alltoall");
}

void LocalEngine::barrier(Deadline deadline) {
  group_->arrive_and_wait(rank_, deadline, "barrier");
}

std::unique_ptr<Engine> LocalEngine::split(const SplitGroup& g, Deadline deadline) {
  std::shared_ptr<Group> child;
  if (g.color >= 0) {
    std::lock_guard lock(group_->mutex);
    auto& slot = group_->children[{g.split_id, g.color}];
    if (!slot) slot = std::make_shared<Group>(static_cast<int>(g.members.size()));
    child = slot;
  }
  // Nobody may look the child up under a later split id before all have fetched theirs.
  barrier(deadline);
  if (!child) return nullptr;
  return std::make_unique<LocalEngine>(child, g.new_rank);
}

}  // namespace distml::comm::local
