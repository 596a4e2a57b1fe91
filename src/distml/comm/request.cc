#include "distml/comm/request.h"

#include <thread>

#include "distml/core/error.h"

namespace distml::comm {

bool poll_until(Request& request, Deadline deadline) {
  using namespace std::chrono;
  const auto start = Clock::now();
  for (unsigned spin = 0;; ++spin) {
    if (request.test()) return true;
    if ((spin & 63) == 0) {
      auto now = Clock::now();
      if (now >= deadline.at) return false;
      auto waited = now - start;
      if (waited > milliseconds(20)) {
        std::this_thread::sleep_for(microseconds(100));
        continue;
      }
      if (waited > microseconds(50)) std::this_thread::yield();
    }
  }
}

std::string describe_transfer(bool is_send, int peer, int tag, std::size_t bytes) {
  return cat(is_send ? "send to rank " : "recv from rank ", peer, " (tag ", tag, ", ", bytes,
             " bytes)");
}

CommError size_mismatch(int src, int tag, std::size_t expected, std::size_t got) {
  return CommError(cat("recv from rank ", src, " (tag ", tag, "): expected ", expected,
                       " bytes but the message has ", got,
                       " - ranks passed different counts or dtypes to the same operation"));
}

}  // namespace distml::comm
