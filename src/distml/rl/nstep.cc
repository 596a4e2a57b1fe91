#include "distml/rl/nstep.h"

#include "distml/core/error.h"

namespace distml::rl {

NStepWindow::NStepWindow(int n, double gamma) : n_(n), gamma_(gamma) {
  if (n < 1) throw Error(cat("NStepWindow: n must be at least 1, got ", n));
  if (!(gamma >= 0 && gamma <= 1)) {
    throw Error(cat("NStepWindow: gamma must be in [0, 1], got ", gamma));
  }
}

void NStepWindow::add(std::span<const float> observation, std::span<const float> action,
                      float reward, bool terminated, bool ended,
                      std::span<const float> next_observation, std::vector<Transition>& out) {
  pending_.push_back(
      {{observation.begin(), observation.end()}, {action.begin(), action.end()}, reward});
  if (ended || terminated) {
    // The window of every pending step now stops at the episode end, so all are complete.
    while (!pending_.empty()) emit_front(terminated, next_observation, out);
  } else if (pending_.size() == static_cast<std::size_t>(n_)) {
    emit_front(false, next_observation, out);
  }
}

void NStepWindow::emit_front(bool terminated, std::span<const float> next_observation,
                             std::vector<Transition>& out) {
  // Accumulate in double so a long window rounds once, when stored.
  double ret = 0, weight = 1;
  for (const Step& step : pending_) {
    ret += weight * step.reward;
    weight *= gamma_;
  }
  Step& front = pending_.front();
  out.push_back({std::move(front.observation),
                 std::move(front.action),
                 static_cast<float>(ret),
                 terminated ? 0.0f : static_cast<float>(weight),
                 {next_observation.begin(), next_observation.end()}});
  pending_.pop_front();
}

}  // namespace distml::rl
