#include "distml/core/preemption.h"

#include <signal.h>
#include <time.h>

#include <atomic>

namespace distml {
namespace {

std::atomic<bool> caught{false};
volatile sig_atomic_t requested = 0;
volatile sig_atomic_t first_at_s = 0;  // CLOCK_MONOTONIC seconds of the first request

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
  if (!requested) first_at_s = static_cast<sig_atomic_t>(now.tv_sec);
  requested = 1;
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

bool preemption_requested() { return requested != 0; }

}  // namespace distml
