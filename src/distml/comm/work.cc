#include "distml/comm/work.h"

namespace distml::comm {

bool Work::test() {
  if (!request_) return true;
  try {
    return request_->test();
  } catch (...) {
    return true;  // failed: finished; wait() rethrows
  }
}

void Work::wait(Millis timeout) {
  if (!request_) return;
  if (!request_->wait_until(Deadline::after(timeout))) {
    const std::string why = diagnosis_ ? diagnosis_() : "";
    throw TimeoutError(cat(request_->describe(), ": not complete after ", timeout.count(), " ms",
                           why.empty() ? "" : "; ", why));
  }
}

}  // namespace distml::comm
