// The transfers of PeerMesh (the protocol is in peer_mesh.h); the connections are made in
// peer_mesh_connect.cc.
#include "distml/comm/gloo/peer_mesh.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "distml/comm/gloo/peer_mesh_impl.h"

namespace distml::comm::gloo {
namespace {

constexpr std::uint64_t kWakeEvent = ~0ull;
// A frame longer than this is a corrupt stream, not a message (1 TiB).
constexpr std::uint64_t kMaxFrameBytes = 1ull << 40;

Key key_of(const Frame& f) { return Key{f.group, f.tag, f.channel}; }

// Reads with MSG_DONTWAIT (the sockets stay blocking for the handshake), past interruptions.
ssize_t read_some(int fd, void* into, std::size_t bytes) {
  for (;;) {
    const ssize_t n = ::recv(fd, into, bytes, MSG_DONTWAIT);
    if (n >= 0 || errno != EINTR) return n;
  }
}

class MeshRequest final : public Request {
 public:
  MeshRequest(std::shared_ptr<PeerMesh> mesh, Connection& c, std::shared_ptr<Transfer> t)
      : mesh_(std::move(mesh)), connection_(c), transfer_(std::move(t)) {}

  ~MeshRequest() override {
    std::lock_guard lock(connection_.mutex);
    if (!transfer_->done) withdraw(connection_, transfer_);
  }

  bool test() override {
    std::lock_guard lock(connection_.mutex);
    return finished();
  }

  bool wait_until(Deadline deadline) override {
    std::unique_lock lock(connection_.mutex);
    auto done = [&] { return transfer_->done; };
    if (deadline.at == Clock::time_point::max())
      transfer_->cv.wait(lock, done);
    else if (!transfer_->cv.wait_until(lock, deadline.at, done))
      return false;
    return finished();
  }

  std::string describe() const override { return transfer_->describe(); }

 private:
  bool finished() const {
    if (!transfer_->done) return false;
    if (!transfer_->error.empty()) throw CommError(transfer_->error);
    return true;
  }

  std::shared_ptr<PeerMesh> mesh_;  // keeps the connection and its reader alive
  Connection& connection_;
  std::shared_ptr<Transfer> transfer_;
};

}  // namespace

std::string Transfer::describe() const { return describe_transfer(is_send, peer, tag, bytes); }

void Transfer::finish(std::string why) {
  fail(why.empty() ? std::string() : cat(describe(), ": ", why));
}

void Transfer::fail(std::string message) {
  done = true;
  error = std::move(message);
  cv.notify_all();
}

void withdraw(Connection& c, const std::shared_ptr<Transfer>& t) {
  if (t->is_send) {
    auto it = std::find(c.unsent.begin(), c.unsent.end(), t);
    if (it == c.unsent.end()) return;
    if (t->written == 0) {
      c.unsent.erase(it);
    } else {  // partly on the wire: the rest must follow, from a copy
      t->own.assign(t->data, t->data + t->bytes);
      t->data = t->own.data();
    }
    return;
  }
  if (c.target == t) {
    c.target.reset();
    c.discard = true;
  } else if (c.early && c.early->claimed == t) {
    c.early->claimed.reset();
  } else if (auto q = c.posted.find(t->key); q != c.posted.end()) {
    std::erase(q->second, t);
    if (q->second.empty()) c.posted.erase(q);
  }
}

PeerMesh::~PeerMesh() = default;

PeerMesh::Impl::~Impl() {
  if (reader.joinable()) {
    const std::uint64_t one = 1;
    (void)!::write(wake_fd, &one, sizeof one);
    reader.join();
  }
  for (auto& c : connections)
    if (c && c->fd >= 0) ::close(c->fd);
  if (epoll_fd >= 0) ::close(epoll_fd);
  if (wake_fd >= 0) ::close(wake_fd);
}

Connection& PeerMesh::Impl::connection(int world_rank) {
  DML_CHECK(world_rank >= 0 && world_rank < size && world_rank != rank, "no connection to rank ",
            world_rank, " from rank ", rank, " of ", size);
  return *connections[world_rank];
}

void PeerMesh::Impl::start_reader() {
  epoll_fd = ::epoll_create1(EPOLL_CLOEXEC);
  wake_fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (epoll_fd < 0 || wake_fd < 0) throw CommError(cat("gloo engine: epoll: ", strerror(errno)));
  epoll_event wake{.events = EPOLLIN, .data = {.u64 = kWakeEvent}};
  ::epoll_ctl(epoll_fd, EPOLL_CTL_ADD, wake_fd, &wake);
  for (auto& c : connections) {
    if (!c) continue;
    epoll_event e{.events = EPOLLIN, .data = {.u64 = static_cast<std::uint64_t>(c->peer)}};
    if (::epoll_ctl(epoll_fd, EPOLL_CTL_ADD, c->fd, &e) != 0)
      throw CommError(cat("gloo engine: epoll: ", strerror(errno)));
  }
  reader = std::thread([this] { read_loop(); });
}

void PeerMesh::Impl::read_loop() {
  epoll_event events[16];
  for (;;) {
    const int n = ::epoll_wait(epoll_fd, events, 16, -1);
    if (n < 0 && errno != EINTR) return;
    for (int i = 0; i < n; ++i) {
      if (events[i].data.u64 == kWakeEvent) return;  // the mesh is going away
      Connection& c = *connections[events[i].data.u64];
      std::lock_guard lock(c.mutex);
      if (!c.broken.empty()) continue;
      if (events[i].events & EPOLLOUT) flush_unsent(c);
      if (events[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) read_available(c);
    }
  }
}

void PeerMesh::Impl::read_available(Connection& c) {
  while (c.broken.empty()) {
    if (c.frame_read < sizeof(Frame)) {
      const ssize_t n = read_some(c.fd, reinterpret_cast<std::byte*>(&c.frame) + c.frame_read,
                                  sizeof(Frame) - c.frame_read);
      if (!read_went_well(c, n)) return;
      c.frame_read += n;
      if (c.frame_read < sizeof(Frame)) continue;
      if (c.frame.bytes > kMaxFrameBytes)
        return break_connection(c, cat("a frame of ", c.frame.bytes, " bytes (a corrupt stream)"));
      start_payload(c);
      if (c.frame.bytes == 0) end_payload(c);
      continue;
    }
    const std::size_t left = c.frame.bytes - c.payload_read;
    std::byte* into = c.discard  ? sink.data()
                      : c.target ? c.target->data + c.payload_read
                                 : c.early->data.get() + c.payload_read;
    const ssize_t n = read_some(c.fd, into, c.discard ? std::min(left, sink.size()) : left);
    if (!read_went_well(c, n)) return;
    c.payload_read += n;
    if (c.payload_read == c.frame.bytes) end_payload(c);
  }
}

bool PeerMesh::Impl::read_went_well(Connection& c, ssize_t n) {
  if (n > 0) return true;
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return false;
  break_connection(c, n == 0 ? std::string("closed by the peer") : std::string(strerror(errno)));
  return false;
}

// The frame's header is in: decide where its bytes go.
void PeerMesh::Impl::start_payload(Connection& c) {
  const Key key = key_of(c.frame);
  if (auto q = c.posted.find(key); q != c.posted.end()) {
    c.target = std::move(q->second.front());
    q->second.pop_front();
    if (q->second.empty()) c.posted.erase(q);
    if (c.target->bytes != c.frame.bytes) {
      auto t = std::move(c.target);
      t->fail(size_mismatch(t->peer, t->tag, t->bytes, c.frame.bytes).what());
      c.discard = true;
    }
    return;
  }
  c.early = std::make_shared<Early>();
  c.early->bytes = c.frame.bytes;
  c.early->data.reset(new std::byte[c.frame.bytes]);
  c.arrived[key].push_back(c.early);
}

void PeerMesh::Impl::end_payload(Connection& c) {
  if (c.target) c.target->finish();
  if (c.early) {
    c.early->complete = true;
    if (auto t = std::move(c.early->claimed)) {
      if (t->bytes) std::memcpy(t->data, c.early->data.get(), t->bytes);
      c.early->data.reset();
      t->finish();
    }
  }
  c.target.reset();
  c.early.reset();
  c.discard = false;
  c.frame_read = c.payload_read = 0;
}

bool PeerMesh::Impl::write_some(Connection& c, Transfer& t) {
  const std::size_t total = sizeof(Frame) + t.bytes;
  while (t.written < total) {
    iovec parts[2];
    int count = 0;
    if (t.written < sizeof(Frame))
      parts[count++] = {reinterpret_cast<std::byte*>(&t.frame) + t.written,
                        sizeof(Frame) - t.written};
    const std::size_t sent = t.written > sizeof(Frame) ? t.written - sizeof(Frame) : 0;
    if (t.bytes > sent) parts[count++] = {t.data + sent, t.bytes - sent};
    msghdr message{};
    message.msg_iov = parts;
    message.msg_iovlen = count;
    const ssize_t n = ::sendmsg(c.fd, &message, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return false;
      break_connection(c, strerror(errno));  // fails t as well when it is queued
      if (!t.done) t.finish(c.broken);
      return true;
    }
    t.written += n;
  }
  t.finish();
  return true;
}

void PeerMesh::Impl::flush_unsent(Connection& c) {
  while (!c.unsent.empty() && write_some(c, *c.unsent.front())) c.unsent.pop_front();
  watch_writable(c, !c.unsent.empty());
}

void PeerMesh::Impl::watch_writable(Connection& c, bool on) {
  if (c.watching_out == on || !c.broken.empty()) return;
  epoll_event e{.events = EPOLLIN | (on ? EPOLLOUT : 0u),
                .data = {.u64 = static_cast<std::uint64_t>(c.peer)}};
  ::epoll_ctl(epoll_fd, EPOLL_CTL_MOD, c.fd, &e);
  c.watching_out = on;
}

void PeerMesh::Impl::break_connection(Connection& c, const std::string& why) {
  if (!c.broken.empty()) return;
  c.broken = cat("the connection to rank ", c.peer, " broke (", why, "): did rank ", c.peer,
                 " exit or fail?");
  ::epoll_ctl(epoll_fd, EPOLL_CTL_DEL, c.fd, nullptr);
  auto fail = [&](const std::shared_ptr<Transfer>& t) {
    if (t && !t->done) t->finish(c.broken);
  };
  fail(c.target);
  if (c.early) fail(c.early->claimed);
  for (auto& [key, queue] : c.posted)
    for (auto& t : queue) fail(t);
  for (auto& t : c.unsent) fail(t);
  c.posted.clear();
  c.unsent.clear();
  c.target.reset();
  c.early.reset();
}

RequestPtr PeerMesh::send(const std::shared_ptr<PeerMesh>& mesh, Peer peer, Channel ch, int tag,
                          const void* data, std::size_t bytes) {
  DML_CHECK(tag >= 0, "point-to-point tag ", tag, " is negative");
  Impl& impl = *mesh->impl_;
  Connection& c = impl.connection(peer.world_rank);
  auto t = std::make_shared<Transfer>(
      true, peer.group_rank, tag, bytes,
      Key{peer.group, static_cast<std::uint32_t>(tag), static_cast<std::uint8_t>(ch)},
      static_cast<std::byte*>(const_cast<void*>(data)));
  t->frame =
      Frame{peer.group, bytes, static_cast<std::uint32_t>(tag), static_cast<std::uint8_t>(ch), {}};
  std::lock_guard lock(c.mutex);
  if (!c.broken.empty()) {
    t->finish(c.broken);
  } else if (!c.unsent.empty() || !impl.write_some(c, *t)) {
    c.unsent.push_back(t);  // the reader writes the rest as the socket drains
    impl.watch_writable(c, true);
  }
  return std::make_unique<MeshRequest>(mesh, c, std::move(t));
}

RequestPtr PeerMesh::recv(const std::shared_ptr<PeerMesh>& mesh, Peer peer, Channel ch, int tag,
                          void* data, std::size_t bytes) {
  DML_CHECK(tag >= 0, "point-to-point tag ", tag, " is negative");
  Connection& c = mesh->impl_->connection(peer.world_rank);
  const Key key{peer.group, static_cast<std::uint32_t>(tag), static_cast<std::uint8_t>(ch)};
  auto t = std::make_shared<Transfer>(false, peer.group_rank, tag, bytes, key,
                                      static_cast<std::byte*>(data));
  std::lock_guard lock(c.mutex);
  auto q = c.arrived.find(key);
  if (!c.broken.empty() && q == c.arrived.end()) {
    t->finish(c.broken);
  } else if (q == c.arrived.end()) {
    c.posted[key].push_back(t);
  } else {
    auto early = std::move(q->second.front());
    q->second.pop_front();
    if (q->second.empty()) c.arrived.erase(q);
    if (early->bytes != bytes) {
      t->fail(size_mismatch(t->peer, tag, bytes, early->bytes).what());
    } else if (!early->complete && !c.broken.empty()) {
      t->finish(c.broken);  // its rest will never come
    } else if (!early->complete) {
      early->claimed = t;  // the reader copies it out when the rest has come
    } else {
      if (bytes) std::memcpy(t->data, early->data.get(), bytes);
      t->finish();
    }
  }
  return std::make_unique<MeshRequest>(mesh, c, std::move(t));
}

}  // namespace distml::comm::gloo
