#include "distml/core/preemption.h"

#include <signal.h>

#include <atomic>

namespace distml {
namespace {

std::atomic<bool> caught{false};
volatile sig_atomic_t requested = 0;

void on_preemption(int sig) {
  if (requested && sig == SIGTERM) {  // asked twice: end now, as without the handler
    ::signal(SIGTERM, SIG_DFL);
    ::raise(SIGTERM);
  }
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
