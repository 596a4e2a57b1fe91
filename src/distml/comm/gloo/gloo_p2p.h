// Point-to-point transfers of the gloo engine, posted straight on the gloo context that
// c10d's ProcessGroupGloo connected (the same calls its send/recv make, minus their limits).
// Private to comm/gloo/.
//
// Why not c10d's send/recv as they are (all three checked on this machine, gloo 2022-05-18):
//  1. A receive posted for fewer bytes than the sender sends aborts the receiving process
//     (EnforceNotMet "op.preamble.length <= op.nbytes" thrown on gloo's device thread); one
//     posted for more completes silently with the tail untouched.
//  2. c10d's Work::isCompleted() of a send or recv stays false until wait() is called, so
//     it cannot be polled.
//  3. A wait that times out (Work::wait(timeout), UnboundBuffer::waitRecv(timeout)) closes
//     every connection of the context ("Application timeout caused pair closure"), so
//     nothing is left to tell the peers or to diagnose with.
// And the fix below needs 64-bit gloo slots, where c10d's send/recv take a 31-bit tag.
//
// The protocol, per message:
//  1. The sender posts an 8-byte header holding the byte count on the header slot of
//     (channel, tag), and the payload on a payload slot that also encodes the byte count.
//  2. The receiver posts, at once and in the same order, a header receive and a payload
//     receive for the count it expects. gloo matches each slot in posting order, so
//     messages of one (peer, channel, tag) stay in order.
//  3. Equal counts: both complete; no extra round trip, no copy. Different counts: the
//     payloads sit on different slots and never meet (no overrun is possible); the header
//     arrives and the receive fails with size_mismatch(). The unmatched payloads stay posted,
//     which is fine because the communicator is unusable after such a failure.
//  4. Waits never use gloo's timeout: a per-engine WaitAborter aborts a blocked wait at its
//     deadline (UnboundBuffer::abortWaitRecv), which leaves the transfer and the connections
//     as they were. wait_until() blocks on the caller's thread; test(), which gloo cannot
//     answer without blocking, hands the wait to a thread of the request's own.
#pragma once

#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "distml/comm/engine.h"

namespace gloo {
class Context;
namespace transport {
class UnboundBuffer;
}
}  // namespace gloo

namespace distml::comm::gloo {

/// Aborts blocked gloo waits whose deadline has passed, from one background thread.
class WaitAborter {
 public:
  using Ticket = std::uint64_t;
  WaitAborter();
  ~WaitAborter();
  WaitAborter(const WaitAborter&) = delete;
  WaitAborter& operator=(const WaitAborter&) = delete;

  /// Arranges for the wait on `buffer` to be aborted at `at`; call disarm() before the
  /// buffer goes away.
  Ticket arm(Clock::time_point at, ::gloo::transport::UnboundBuffer* buffer, bool is_send);
  void disarm(Ticket ticket);

 private:
  struct Entry {
    Clock::time_point at;
    ::gloo::transport::UnboundBuffer* buffer;
    bool is_send;
  };
  void loop();

  std::mutex mutex_;
  std::condition_variable cv_;
  std::map<Ticket, Entry> entries_;  // one per thread blocked in a wait: a handful
  Ticket next_ = 0;
  Clock::time_point wake_at_ = Clock::time_point::max();  // when the thread next looks
  bool stop_ = false;
  std::thread thread_;
};

/// The gloo buffers of one transfer, and the header they send or receive into.
struct PostedTransfer;

/// What the transfers of one group share with its engine; outlives the engine if a request
/// does.
struct P2pLink {
  P2pLink(std::shared_ptr<::gloo::Context> c, std::shared_ptr<WaitAborter> a);
  ~P2pLink();
  /// Keeps the buffers of a transfer abandoned unfinished: gloo cannot withdraw a posted
  /// buffer, and one destroyed while posted wedges its connection (an expired send stays at
  /// the head of the transmit queue; data for an expired receive is never read).
  void bury(std::unique_ptr<PostedTransfer> transfer);

  std::shared_ptr<::gloo::Context> context;
  std::shared_ptr<WaitAborter> aborter;  // shared by a world and its sub-groups
  std::mutex mutex;
  std::vector<std::unique_ptr<PostedTransfer>> abandoned;
};

/// Start the transfers of the protocol above; tags must be in [0, kMaxP2pTag]. A request is
/// used by one thread at a time. Destroying an unfinished one leaves the transfer posted
/// (see P2pLink::bury): the peer may still read or write the caller's memory, so the
/// process should then exit.
inline constexpr int kMaxP2pTag = (1 << 20) - 1;
RequestPtr start_send(const std::shared_ptr<P2pLink>& link, Channel ch, const void* data,
                      std::size_t bytes, int dst, int tag);
RequestPtr start_recv(const std::shared_ptr<P2pLink>& link, Channel ch, void* data,
                      std::size_t bytes, int src, int tag);

}  // namespace distml::comm::gloo
