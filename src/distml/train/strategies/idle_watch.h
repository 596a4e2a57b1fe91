// The watchdog of a server's polling loop: a server has no collective to time out in, so it
// fails on its own when none of its peers has sent anything for the communicator's timeout.
#pragma once

#include <chrono>
#include <thread>

#include "distml/comm/types.h"
#include "distml/core/clock.h"

namespace distml::train {

class IdleWatch {
 public:
  explicit IdleWatch(comm::Millis timeout) : timeout_(timeout), deadline_(Clock::now() + timeout) {}

  /// Called once per pass of the loop with whether anything happened in it. True when
  /// nothing has for the timeout; otherwise, after an idle pass, it yields the core briefly.
  bool expired(bool progress) {
    const auto now = Clock::now();
    if (progress) {
      deadline_ = now + timeout_;
      return false;
    }
    if (now > deadline_) return true;
    std::this_thread::sleep_for(std::chrono::microseconds(20));
    return false;
  }

  double timeout_s() const { return std::chrono::duration<double>(timeout_).count(); }

 private:
  comm::Millis timeout_;
  Clock::time_point deadline_;
};

}  // namespace distml::train
