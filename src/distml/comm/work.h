// Work: the handle an asynchronous call returns.
//
// Contract (as c10d's Work): the buffers passed to the call belong to the operation until
// wait() or test() has reported completion; read or write them only after that. wait()
// rethrows the failure the operation ended with (CommError, TimeoutError, ...), every time
// it is called. A Work that is destroyed without wait() still completes in the background;
// its buffers must stay alive until then.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "distml/comm/request.h"

namespace distml::comm {

class Work {
 public:
  Work() = default;
  /// `diagnosis`, when given, is appended to a timeout's message (the stall inspector's last
  /// account of the ranks waited for).
  Work(std::shared_ptr<Request> request, Millis default_timeout,
       std::function<std::string()> diagnosis = {})
      : request_(std::move(request)),
        default_timeout_(default_timeout),
        diagnosis_(std::move(diagnosis)) {}

  /// True when the operation has finished (successfully or not); never blocks.
  bool test();
  /// Blocks until finished; throws TimeoutError after the communicator's timeout.
  void wait() { wait(default_timeout_); }
  /// Blocks until finished or `timeout`; throws TimeoutError naming the operation on expiry,
  /// and the operation's own error if it failed.
  void wait(Millis timeout);
  /// When the operation completed, for a finished asynchronous collective (timelines);
  /// nullopt otherwise (still running, a point-to-point transfer, no operation).
  std::optional<Clock::time_point> completed_at() const {
    return request_ ? request_->completed_at() : std::nullopt;
  }

 private:
  std::shared_ptr<Request> request_;
  Millis default_timeout_{0};
  std::function<std::string()> diagnosis_;
};

}  // namespace distml::comm
