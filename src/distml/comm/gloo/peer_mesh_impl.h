// The state behind PeerMesh, shared by its transfers (peer_mesh.cc) and its connecting
// (peer_mesh_connect.cc). Private to comm/gloo/.
#pragma once

#include <sys/types.h>

#include <compare>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <thread>

#include "distml/comm/gloo/peer_mesh.h"

namespace distml::comm::gloo {

/// What precedes each message on a connection. Both ends run one build on little-endian
/// hosts, so the layout is the same.
struct Frame {
  std::uint64_t group;
  std::uint64_t bytes;
  std::uint32_t tag;
  std::uint8_t channel;
  std::uint8_t unused[3];
};
static_assert(sizeof(Frame) == 24);

/// The stream a message belongs to on one connection.
struct Key {
  std::uint64_t group;
  std::uint32_t tag;
  std::uint8_t channel;
  auto operator<=>(const Key&) const = default;
};

/// One send or receive; guarded by its connection's mutex.
struct Transfer {
  Transfer(bool s, int p, int t, std::size_t b, Key k, std::byte* d)
      : is_send(s), peer(p), tag(t), bytes(b), key(k), data(d) {}
  std::string describe() const;
  /// Completes it: successfully, or failed for `why` (the message then names the transfer).
  void finish(std::string why = {});
  /// Completes it as failed with `message` as it stands (size_mismatch names the transfer).
  void fail(std::string message);

  bool is_send;
  int peer;  // in its group, for messages
  int tag;
  std::size_t bytes;
  Key key;
  std::byte* data;             // the caller's memory, or `own` once a send is withdrawn
  Frame frame{};               // a send's
  std::size_t written = 0;     // of a send's frame and bytes
  std::vector<std::byte> own;  // a withdrawn send's bytes
  bool done = false;
  std::string error;           // a failed one's message
  std::condition_variable cv;  // on the connection's mutex
};

/// A message that came before its receive was posted.
struct Early {
  std::size_t bytes = 0;
  std::unique_ptr<std::byte[]> data;
  bool complete = false;
  std::shared_ptr<Transfer> claimed;  // a receive waiting for its rest
};

/// One peer's socket and everything in flight on it.
struct Connection {
  int peer = -1;  // world rank
  int fd = -1;
  std::mutex mutex;
  std::string broken;  // why, once it has broken
  // The frame being read (by the reader thread), and where its bytes go: a posted receive,
  // an early buffer, or nowhere.
  Frame frame{};
  std::size_t frame_read = 0, payload_read = 0;
  std::shared_ptr<Transfer> target;
  std::shared_ptr<Early> early;
  bool discard = false;
  std::map<Key, std::deque<std::shared_ptr<Transfer>>> posted;
  std::map<Key, std::deque<std::shared_ptr<Early>>> arrived;
  std::deque<std::shared_ptr<Transfer>> unsent;  // sends the socket has not taken whole yet
  bool watching_out = false;                     // EPOLLOUT registered
};

/// Takes `t` out of what its connection will fill or send (peer_mesh.h, step 4).
void withdraw(Connection& c, const std::shared_ptr<Transfer>& t);

struct PeerMesh::Impl {
  ~Impl();
  Connection& connection(int world_rank);
  void start_reader();
  void read_loop();
  void read_available(Connection& c);
  bool read_went_well(Connection& c, ssize_t n);
  void start_payload(Connection& c);
  void end_payload(Connection& c);
  /// Writes what the socket takes of `t`; true once `t` has finished (written or failed).
  bool write_some(Connection& c, Transfer& t);
  void flush_unsent(Connection& c);
  void watch_writable(Connection& c, bool on);
  void break_connection(Connection& c, const std::string& why);

  int rank = 0, size = 1;
  std::vector<std::unique_ptr<Connection>> connections;  // by world rank; none for this one
  int epoll_fd = -1, wake_fd = -1;
  std::vector<std::byte> sink = std::vector<std::byte>(1 << 16);  // dropped frames
  std::thread reader;
};

}  // namespace distml::comm::gloo
