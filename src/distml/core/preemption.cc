#include "distml/core/preemption.h"

#include <signal.h>
#include <time.h>

#include <atomic>

namespace distml {
namespace {

std::atomic<bool> caught{false};
// Atomics, not only volatile: a thread sets them too (request_preemption). Lock-free, so safe in
// a signal handler.
std::atomic<bool> requested{false};
std::atomic<long> first_at_s{0};  // CLOCK_MONOTONIC seconds of the first request
static_assert(std::atomic<bool>::is_always_lock_free && std::atomic<long>::is_always_lock_free);

// A scheduler signals every process of a job, and the launcher passes the same signal on a
// moment later: a second SIGTERM ends the process only when it comes 3 s or more after the
// first. clock_gettime is async-signal-safe.
void on_preemption(int sig) {
  timespec now{};
  ::clock_gettime(CLOCK_MONOTONIC, &now);
  if (requested && sig == SIGTERM && now.tv_sec - first_at_s >= 3) {
    ::signal(SIGTERM, SIG_DFL);  // asked again: end now, as without the handler
    ::raise(SIGTERM);
  }
  if (!requested) first_at_s = now.tv_sec;
  requested = true;
}

}  // namespace

void catch_preemption_signals() {
  struct sigaction sa {};
  sa.sa_handler = on_preemption;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  for (int sig : {SIGTERM, SIGUSR1}) ::sigaction(sig, &sa, nullptr);
  caught = true;
}

bool preemption_caught() { return caught; }

void request_preemption() { on_preemption(SIGUSR1); }

bool preemption_requested() { return requested; }

}  // namespace distml
