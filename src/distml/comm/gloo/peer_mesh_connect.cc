// PeerMesh's connections: each rank listens, publishes "PORT HOST" in the store, dials every
// lower rank and accepts every higher one; a hello names the dialling rank and checks that
// both belong to a world of the same size.
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "distml/comm/gloo/gloo_engine.h"  // message_of
#include "distml/comm/gloo/peer_mesh_impl.h"

namespace distml::comm::gloo {
namespace {

constexpr std::uint32_t kHelloMagic = 0x504c4d44;  // "DMLP"

struct Hello {
  std::uint32_t magic;
  std::uint32_t rank;
  std::uint32_t size;
};

std::string key_of(int rank) { return cat("distml/p2p/", rank); }

// A socket closed when it goes out of scope, unless released.
struct Socket {
  explicit Socket(int f = -1) : fd(f) {}
  Socket(Socket&& o) noexcept : fd(std::exchange(o.fd, -1)) {}
  ~Socket() {
    if (fd >= 0) ::close(fd);
  }
  int release() { return std::exchange(fd, -1); }
  int fd;
};

// Waits until `fd` is ready for `events`; false at the deadline.
bool ready(int fd, short events, Deadline deadline) {
  for (;;) {
    const auto left = std::chrono::ceil<Millis>(deadline.at - Clock::now()).count();
    if (left <= 0) return false;
    pollfd p{fd, events, 0};
    const int n = ::poll(&p, 1, static_cast<int>(std::min<long long>(left, 1 << 30)));
    if (n > 0) return true;
    if (n < 0 && errno != EINTR) throw CommError(cat("gloo engine: poll: ", strerror(errno)));
  }
}

addrinfo* resolve(const std::string& host, const std::string& port, bool passive) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0);
  addrinfo* found = nullptr;
  if (const int rc = ::getaddrinfo(host.c_str(), port.c_str(), &hints, &found); rc != 0)
    throw CommError(cat("gloo engine: cannot resolve ", host, ": ", gai_strerror(rc)));
  return found;
}

// A listening socket on `host`, any port; returns the port.
Socket listen_on(const std::string& host, int backlog, int& port) {
  addrinfo* a = resolve(host, "0", true);
  Socket s(::socket(a->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  const bool ok =
      s.fd >= 0 && ::bind(s.fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(s.fd, backlog) == 0;
  ::freeaddrinfo(a);
  sockaddr_storage bound{};
  socklen_t length = sizeof bound;
  if (!ok || ::getsockname(s.fd, reinterpret_cast<sockaddr*>(&bound), &length) != 0)
    throw CommError(cat("gloo engine: cannot listen on ", host, ": ", strerror(errno)));
  port = ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6&>(bound).sin6_port
                                           : reinterpret_cast<sockaddr_in&>(bound).sin_port);
  return s;
}

// Connects to "PORT HOST" without blocking past the deadline.
Socket dial(const std::string& address, int peer, Deadline deadline) {
  const auto space = address.find(' ');
  const std::string port = address.substr(0, space), host = address.substr(space + 1);
  addrinfo* a = resolve(host, port, false);
  Socket s(::socket(a->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  int rc = s.fd < 0 ? -1 : ::connect(s.fd, a->ai_addr, a->ai_addrlen);
  ::freeaddrinfo(a);
  if (rc != 0 && errno == EINPROGRESS) {
    if (!ready(s.fd, POLLOUT, deadline))
      throw TimeoutError(cat("gloo engine: connecting to rank ", peer, " at ", host, ":", port,
                             " did not finish in time"));
    socklen_t length = sizeof rc;
    ::getsockopt(s.fd, SOL_SOCKET, SO_ERROR, &rc, &length);
    errno = rc;
  }
  if (rc != 0)
    throw CommError(cat("gloo engine: cannot connect to rank ", peer, " at ", host, ":", port, ": ",
                        strerror(errno)));
  return s;
}

void set_options(int fd) {
  const int on = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
}

}  // namespace

std::uint64_t sub_group_id(std::uint64_t parent, std::uint64_t split_id, int color) {
  // FNV-1a over the three numbers: distinct groups of one job differ in one of them.
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (std::uint64_t v : {parent, split_id, static_cast<std::uint64_t>(color)})
    for (int i = 0; i < 8; ++i) h = (h ^ ((v >> (8 * i)) & 0xff)) * 0x100000001b3ull;
  return h == 0 ? 1 : h;
}

PeerMesh::PeerMesh(c10d::Store& store, int rank, int size, const std::string& host,
                   Deadline deadline)
    : impl_(std::make_unique<Impl>()) {
  impl_->rank = rank;
  impl_->size = size;
  impl_->connections.resize(size);
  if (size == 1) return;
  int port = 0;
  Socket listener = listen_on(host, size, port);
  const std::string mine = cat(port, " ", host);
  store.set(key_of(rank), std::vector<std::uint8_t>(mine.begin(), mine.end()));
  auto add = [&](int peer, Socket s) {
    set_options(s.fd);
    auto c = std::make_unique<Connection>();
    c->peer = peer;
    c->fd = s.release();
    impl_->connections[peer] = std::move(c);
  };
  // Lower ranks: dial (their listeners queue us until they accept).
  for (int peer = 0; peer < rank; ++peer) {
    std::vector<std::uint8_t> address;
    try {
      const auto left = std::max(std::chrono::ceil<Millis>(deadline.at - Clock::now()), Millis(1));
      store.wait({key_of(peer)}, left);
      address = store.get(key_of(peer));
    } catch (const std::exception& e) {
      throw TimeoutError(cat("gloo engine: rank ", peer, " did not publish its address in time (",
                             message_of(e), ")"));
    }
    Socket s = dial(std::string(address.begin(), address.end()), peer, deadline);
    const Hello hello{kHelloMagic, static_cast<std::uint32_t>(rank),
                      static_cast<std::uint32_t>(size)};
    if (!ready(s.fd, POLLOUT, deadline) ||
        ::send(s.fd, &hello, sizeof hello, MSG_NOSIGNAL) != sizeof hello)
      throw CommError(cat("gloo engine: cannot greet rank ", peer, ": ", strerror(errno)));
    add(peer, std::move(s));
  }
  // Higher ranks: accept, in whatever order they come.
  for (int accepted = 0; accepted < size - 1 - rank; ++accepted) {
    if (!ready(listener.fd, POLLIN, deadline)) {
      std::string missing;
      for (int r = rank + 1; r < size; ++r)
        if (!impl_->connections[r]) missing += cat(missing.empty() ? "" : ", ", r);
      throw TimeoutError(
          cat("gloo engine: ranks that did not connect to rank ", rank, " in time: ", missing));
    }
    Socket s(::accept4(listener.fd, nullptr, nullptr, SOCK_CLOEXEC));
    Hello hello{};
    if (s.fd < 0 || !ready(s.fd, POLLIN, deadline) ||
        ::recv(s.fd, &hello, sizeof hello, MSG_WAITALL) != sizeof hello ||
        hello.magic != kHelloMagic)
      throw CommError(cat("gloo engine: a connection to rank ", rank, " did not greet as a rank"));
    if (hello.size != static_cast<std::uint32_t>(size) ||
        hello.rank <= static_cast<std::uint32_t>(rank) || hello.rank >= hello.size ||
        impl_->connections[hello.rank])
      throw CommError(cat("gloo engine: rank ", rank, " of ", size, " was greeted as rank ",
                          hello.rank, " of ", hello.size, ": two jobs share a store?"));
    add(static_cast<int>(hello.rank), std::move(s));
  }
  impl_->start_reader();
}

}  // namespace distml::comm::gloo
