// Rendezvous of the gloo engine: the environment says who we are, a FileStore or a TCPStore
// says where the others are.
#include "distml/comm/gloo/gloo_connect.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <torch/csrc/distributed/c10d/FileStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "distml/comm/gloo/gloo_engine.h"
#include "distml/comm/gloo/gloo_store_connect.h"

namespace distml::comm::gloo {
namespace {

std::string env_text(const char* name, const char* meaning) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0')
    throw UsageError(
        cat("gloo engine: environment variable ", name, " is not set (", meaning, ")"));
  return value;
}

int env_int(const char* name, const char* meaning, int lo, int hi) {
  const std::string text = env_text(name, meaning);
  int value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size())
    throw UsageError(cat("gloo engine: environment variable ", name, "='", text,
                         "' is not a number (", meaning, ")"));
  if (value < lo || value > hi)
    throw UsageError(cat("gloo engine: environment variable ", name, "=", value, " is outside [",
                         lo, ", ", hi, "] (", meaning, ")"));
  return value;
}

// Rank 0's check that the store's port is free, before c10d tries it: c10d would fail with a
// page of its own log lines; a port in use is the user's choice to change (MASTER_PORT), not a
// fault of the job. Bound as c10d binds (SO_REUSEADDR, so that a closed store's lingering
// connections do not count).
void check_port_free(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return;  // c10d will say what is wrong
  const int on = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<std::uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_ANY);
  const bool in_use =
      ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 && errno == EADDRINUSE;
  ::close(fd);
  if (in_use)
    throw UsageError(cat("gloo rendezvous: MASTER_PORT=", port, " is in use on this host (by ",
                         "another job's rendezvous?): set MASTER_PORT to a free port, or unset it ",
                         "and distml picks one"));
}

c10::intrusive_ptr<c10d::Store> tcp_store(int rank, int world, Millis timeout) {
  const std::string host = env_text("MASTER_ADDR", "the host of rank 0's TCPStore");
  const int port = env_int("MASTER_PORT", "the port of rank 0's TCPStore", 1, 65535);
  if (rank == 0) check_port_free(port);
  c10d::TCPStoreOptions options;
  options.port = static_cast<std::uint16_t>(port);
  options.isServer = rank == 0;
  options.numWorkers = world;
  options.waitWorkers = false;  // our own join check names who is missing
  options.timeout = timeout;
  try {
    return c10::make_intrusive<c10d::TCPStore>(host, options);
  } catch (const std::exception& e) {
    if (rank == 0)
      throw CommError(
          cat("gloo rendezvous: cannot serve the TCPStore on port ", port, ": ", message_of(e)));
    throw TimeoutError(cat("gloo rendezvous: no TCPStore at ", host, ":", port, " within ",
                           timeout.count(), " ms (", message_of(e),
                           "); ranks that did not arrive: 0"));
  }
}

// The address of this machine that peers can reach: that of the interface GLOO_SOCKET_IFNAME
// names (as in PyTorch) where it is set, else that of the host name, or loopback where the
// host name does not resolve (c10d does that fallback itself; the second try covers a failing
// bind).
std::shared_ptr<::gloo::transport::Device> default_device() {
  if (const char* interface = std::getenv("GLOO_SOCKET_IFNAME"); interface && *interface) {
    try {
      return c10d::ProcessGroupGloo::createDeviceForInterface(interface);
    } catch (const std::exception& e) {
      throw CommError(cat("gloo: cannot use the interface GLOO_SOCKET_IFNAME=", interface, ": ",
                          message_of(e)));
    }
  }
  try {
    return c10d::ProcessGroupGloo::createDefaultDevice();
  } catch (const std::exception&) {
    return c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1");
  }
}

// gloo writes to its sockets with writev(2), which raises SIGPIPE once a peer has gone; the
// default action would kill this process before gloo reports the error. A handler the
// program installed itself is left alone.
void ignore_sigpipe() {
  struct sigaction current {};
  if (sigaction(SIGPIPE, nullptr, &current) == 0 && current.sa_handler == SIG_DFL)
    signal(SIGPIPE, SIG_IGN);
}

}  // namespace

std::unique_ptr<Engine> connect_engine(const std::string& file_store, Millis timeout) {
  const int size = env_int("WORLD_SIZE", "the number of ranks", 1, 1 << 20);
  const int rank = env_int("RANK", "this process's rank", 0, size - 1);
  c10::intrusive_ptr<c10d::Store> store;
  if (file_store.empty()) {
    store = tcp_store(rank, size, timeout);
  } else {
    try {
      store = c10::make_intrusive<c10d::FileStore>(file_store, size);
    } catch (const std::exception& e) {
      throw CommError(
          cat("gloo rendezvous: cannot use the file store '", file_store, "': ", message_of(e)));
    }
  }
  // Rank 0 serves a TCPStore: it gives up last, so that the others can still read who is
  // missing when their own deadline passes.
  return connect_engine_over(std::move(store), rank, size, timeout,
                             file_store.empty() && rank == 0);
}

std::unique_ptr<Engine> connect_engine_over(c10::intrusive_ptr<c10d::Store> store, int rank,
                                            int size, Millis timeout, bool serves_store) {
  GroupSetup setup;
  setup.size = size;
  setup.rank = rank;
  setup.timeout = timeout;
  setup.join_deadline = Deadline::after(timeout);
  if (serves_store) setup.join_deadline.at += std::min<Millis>(timeout, Millis(2000));
  ignore_sigpipe();
  setup.store = std::move(store);
  setup.store->setTimeout(timeout);
  setup.device = default_device();
  for (int r = 0; r < setup.size; ++r) setup.world_ranks.push_back(r);
  setup.what = "gloo rendezvous";
  return std::make_unique<GlooEngine>(std::move(setup));
}

}  // namespace distml::comm::gloo
