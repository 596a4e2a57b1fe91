#include "distml/rl/learner_inbox.h"

#include <chrono>
#include <thread>

#include "distml/core/clock.h"
#include "distml/core/error.h"
#include "distml/rl/policy_state.h"

namespace distml::rl {

LearnerInbox::LearnerInbox(comm::Communicator& comm, torch::nn::Module& net,
                           Normalizer* normalizer)
    : comm_(comm),
      net_(net),
      normalizer_(normalizer),
      listener_(comm, 0, Channel::from_learner,
                exact_size(MessageKind::parameters, policy_floats(net, normalizer))) {}

void LearnerInbox::take(Message m) {
  if (m.kind == MessageKind::stop) {
    stopped_ = true;
    return;
  }
  unpack_policy(m.payload, net_, normalizer_);
  version_ = m.version;
  counter_ = m.extra;
}

void LearnerInbox::poll() {
  while (!stopped_ && listener_.ready()) take(listener_.take());
}

void LearnerInbox::wait_until(const std::function<bool()>& done, const std::string& what) {
  const auto deadline = Clock::now() + comm_.options().timeout;
  for (poll(); !stopped_ && !done(); poll()) {
    if (Clock::now() > deadline)
      throw TimeoutError(cat("actor rank ", comm_.rank(), ": ", what, " for ",
                             comm_.options().timeout.count() / 1000.0, " s"));
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

void LearnerInbox::wait_for(PendingSend& send, int dst) {
  wait_serving(
      send, dst, listener_, [this](Message m) { take(std::move(m)); }, comm_.options().timeout);
}

}  // namespace distml::rl
