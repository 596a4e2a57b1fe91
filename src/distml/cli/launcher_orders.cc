#include "launcher_orders.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "distml/core/preemption.h"

namespace distml::cli {
namespace {

void read_orders() {
  std::string pending;
  char buf[256];
  for (;;) {
    const ssize_t n = ::read(0, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    pending.append(buf, static_cast<std::size_t>(n));
    for (std::size_t nl; (nl = pending.find('\n')) != std::string::npos;) {
      if (std::string_view(pending).substr(0, nl + 1) == kCheckpointOrder) request_preemption();
      pending.erase(0, nl + 1);
    }
  }
  std::fprintf(stderr, "distml: the launcher is gone (its orders' channel closed); ending\n");
  std::fflush(stderr);
  std::_Exit(128 + SIGHUP);
}

}  // namespace

void follow_launcher_orders() {
  const char* how = std::getenv(kOrdersVar);
  if (!how || std::string_view(how) != "stdin") return;
  std::thread(read_orders).detach();
}

}  // namespace distml::cli
