#include "distml/comm/gloo/gloo_p2p.h"

#include <gloo/context.h>
#include <gloo/transport/unbound_buffer.h>

#include <chrono>

namespace distml::comm::gloo {
namespace {

// A slot is 64 bits: [63:56] prefix, [55] header or payload, [54] channel, [53:34] tag,
// [33:0] the payload's byte count (0 on the header slot). c10d's collectives use gloo's
// prefixes 0x01-0x08 and its own send/recv prefix 0, so 0xD1 meets neither. Payloads whose
// sizes differ by a multiple of 16 GiB share a slot; nothing here sends such messages.
constexpr std::uint64_t kSlotPrefix = 0xD1ull << 56;
constexpr std::uint64_t kCountMask = (1ull << 34) - 1;

std::uint64_t header_slot(Channel ch, int tag) {
  return kSlotPrefix | static_cast<std::uint64_t>(ch) << 54 | static_cast<std::uint64_t>(tag) << 34;
}

std::uint64_t payload_slot(Channel ch, int tag, std::size_t bytes) {
  return header_slot(ch, tag) | 1ull << 55 | (bytes & kCountMask);
}

// gloo's own timeout on a wait, far behind our deadline: it only fires if the aborter could
// not run, and then it closes every connection.
std::chrono::milliseconds backstop(Deadline deadline) {
  constexpr auto kMargin = std::chrono::seconds(60);
  constexpr auto kForever = std::chrono::hours(24 * 365);
  if (deadline.at == Clock::time_point::max()) return kForever;
  auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline.at - Clock::now());
  return std::max<std::chrono::milliseconds>(left, std::chrono::milliseconds(0)) + kMargin;
}

// One half of a transfer: the header or the payload.
struct Part {
  std::unique_ptr<::gloo::transport::UnboundBuffer> buffer;
  bool done = false;
};

}  // namespace

struct PostedTransfer {
  std::uint64_t header = 0;  // the byte count: sent, or as received
  Part parts[2];             // header, payload (none for zero bytes)
};

namespace {

class GlooTransfer final : public Request {
 public:
  GlooTransfer(std::shared_ptr<P2pLink> link, bool is_send, int peer, int tag, std::size_t bytes)
      : link_(std::move(link)),
        is_send_(is_send),
        peer_(peer),
        tag_(tag),
        bytes_(bytes),
        posted_(std::make_unique<PostedTransfer>()) {
    posted_->header = bytes;
  }

  // Posts the header, then the payload (none for zero bytes), in the same order on both sides.
  void post(Channel ch, void* data) {
    try {
      auto& context = *link_->context;
      auto& parts = posted_->parts;
      parts[0].buffer = context.createUnboundBuffer(&posted_->header, sizeof posted_->header);
      if (bytes_) parts[1].buffer = context.createUnboundBuffer(data, bytes_);
      if (is_send_) {
        parts[0].buffer->send(peer_, header_slot(ch, tag_));
        if (bytes_) parts[1].buffer->send(peer_, payload_slot(ch, tag_, bytes_));
      } else {
        parts[0].buffer->recv(peer_, header_slot(ch, tag_));
        if (bytes_) parts[1].buffer->recv(peer_, payload_slot(ch, tag_, bytes_));
      }
    } catch (const std::exception& e) {
      error_ = cat(describe(), ": gloo: ", e.what());
      throw CommError(error_);
    }
  }

  ~GlooTransfer() override {
    if (waiter_.joinable()) {
      for (auto& p : posted_->parts) {
        if (!p.buffer) continue;
        if (is_send_)
          p.buffer->abortWaitSend();
        else
          p.buffer->abortWaitRecv();
      }
      waiter_.join();
    }
    if (!done_) link_->bury(std::move(posted_));
  }

  bool test() override {
    std::unique_lock lock(mutex_);
    if (!waiter_.joinable()) {
      if (done_) return true;
      if (!error_.empty()) throw CommError(error_);
      // gloo cannot be polled: a thread blocks in the wait for us from now on.
      waiter_ = std::thread([this] { wait_in_background(); });
      return false;
    }
    if (!waiter_done_) return false;
    if (!error_.empty()) throw CommError(error_);
    return done_;
  }

  bool wait_until(Deadline deadline) override {
    {
      std::unique_lock lock(mutex_);
      if (waiter_.joinable()) {
        if (!cv_.wait_until(lock, deadline.at, [&] { return waiter_done_; })) return false;
        if (!error_.empty()) throw CommError(error_);
        return done_;
      }
    }
    return drive(deadline);
  }

  std::string describe() const override { return describe_transfer(is_send_, peer_, tag_, bytes_); }

 private:
  // Waits for the header, checks the size, waits for the payload. Runs on one thread at a
  // time: the caller's, or the background waiter's once test() started it.
  bool drive(Deadline deadline) {
    if (done_) return true;
    if (!error_.empty()) throw CommError(error_);
    auto& parts = posted_->parts;
    if (!wait_part(parts[0], deadline)) return false;
    if (!is_send_ && posted_->header != bytes_) {
      error_ = size_mismatch(peer_, tag_, bytes_, posted_->header).what();
      throw CommError(error_);
    }
    if (parts[1].buffer && !wait_part(parts[1], deadline)) return false;
    done_ = true;
    return true;
  }

  bool wait_part(Part& part, Deadline deadline) {
    if (part.done) return true;
    const bool bounded = deadline.at != Clock::time_point::max();
    WaitAborter::Ticket ticket = 0;
    if (bounded) ticket = link_->aborter->arm(deadline.at, part.buffer.get(), is_send_);
    std::string failure;
    try {
      part.done = is_send_ ? part.buffer->waitSend(nullptr, backstop(deadline))
                           : part.buffer->waitRecv(nullptr, backstop(deadline));
    } catch (const std::exception& e) {
      failure = e.what();
    }
    if (bounded) link_->aborter->disarm(ticket);
    if (!failure.empty()) {
      error_ = cat(describe(), ": gloo: ", failure);
      throw CommError(error_);
    }
    return part.done;
  }

  void wait_in_background() {
    try {
      drive(Deadline{Clock::time_point::max()});
    } catch (const CommError&) {
      // recorded in error_
    }
    std::lock_guard lock(mutex_);
    waiter_done_ = true;
    cv_.notify_all();
  }

  std::shared_ptr<P2pLink> link_;
  bool is_send_;
  int peer_, tag_;
  std::size_t bytes_;
  std::unique_ptr<PostedTransfer> posted_;
  bool done_ = false;
  std::string error_;

  std::mutex mutex_;
  std::condition_variable cv_;
  std::thread waiter_;
  bool waiter_done_ = false;
};

RequestPtr start(const std::shared_ptr<P2pLink>& link, bool is_send, Channel ch, void* data,
                 std::size_t bytes, int peer, int tag) {
  DML_CHECK(tag >= 0 && tag <= kMaxP2pTag, "gloo tag ", tag, " outside [0, ", kMaxP2pTag, "]");
  auto transfer = std::make_unique<GlooTransfer>(link, is_send, peer, tag, bytes);
  transfer->post(ch, data);
  return transfer;
}

}  // namespace

P2pLink::P2pLink(std::shared_ptr<::gloo::Context> c, std::shared_ptr<WaitAborter> a)
    : context(std::move(c)), aborter(std::move(a)) {}

P2pLink::~P2pLink() = default;

void P2pLink::bury(std::unique_ptr<PostedTransfer> transfer) {
  std::lock_guard lock(mutex);
  abandoned.push_back(std::move(transfer));
}

WaitAborter::WaitAborter() : thread_([this] { loop(); }) {}

WaitAborter::~WaitAborter() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

WaitAborter::Ticket WaitAborter::arm(Clock::time_point at, ::gloo::transport::UnboundBuffer* buffer,
                                     bool is_send) {
  std::lock_guard lock(mutex_);
  const Ticket ticket = next_++;
  entries_.emplace(ticket, Entry{at, buffer, is_send});
  // Waits of one operation share its deadline: only an earlier one needs to wake the thread.
  if (at < wake_at_) cv_.notify_one();
  return ticket;
}

void WaitAborter::disarm(Ticket ticket) {
  std::lock_guard lock(mutex_);
  entries_.erase(ticket);
}

void WaitAborter::loop() {
  std::unique_lock lock(mutex_);
  while (!stop_) {
    const auto now = Clock::now();
    wake_at_ = Clock::time_point::max();
    for (auto it = entries_.begin(); it != entries_.end();) {
      if (it->second.at <= now) {
        if (it->second.is_send)
          it->second.buffer->abortWaitSend();
        else
          it->second.buffer->abortWaitRecv();
        it = entries_.erase(it);
      } else {
        wake_at_ = std::min(wake_at_, it->second.at);
        ++it;
      }
    }
    if (wake_at_ == Clock::time_point::max())
      cv_.wait(lock);
    else
      cv_.wait_until(lock, wake_at_);
  }
}

RequestPtr start_send(const std::shared_ptr<P2pLink>& link, Channel ch, const void* data,
                      std::size_t bytes, int dst, int tag) {
  // gloo only reads a send buffer.
  return start(link, true, ch, const_cast<void*>(data), bytes, dst, tag);
}

RequestPtr start_recv(const std::shared_ptr<P2pLink>& link, Channel ch, void* data,
                      std::size_t bytes, int src, int tag) {
  return start(link, false, ch, data, bytes, src, tag);
}

}  // namespace distml::comm::gloo
