// The simulator's clock: callbacks in time order, those due at the same moment in the order
// they were scheduled (so that a run is the same every time).
#pragma once

#include <functional>
#include <queue>
#include <tuple>
#include <vector>

namespace distml::sim {

class Events {
 public:
  void at(double t, std::function<void()> f) { queue_.push({t, next_++, std::move(f)}); }
  void run() {
    while (!queue_.empty()) {
      auto e = queue_.top();
      queue_.pop();
      now_ = e.t;
      e.f();
    }
  }
  double now() const { return now_; }

 private:
  struct Event {
    double t;
    long seq;
    std::function<void()> f;
    bool operator>(const Event& o) const { return std::tie(t, seq) > std::tie(o.t, o.seq); }
  };
  std::priority_queue<Event, std::vector<Event>, std::greater<>> queue_;
  long next_ = 0;
  double now_ = 0;
};

}  // namespace distml::sim
