// What one timeline span costs (core/timeline.h): recorded, and with the timeline off (a null
// lane). Prints one JSON line: the median over 7 trials of 10^6 spans each, in nanoseconds.
#include <algorithm>
#include <cstdio>
#include <vector>

#include "distml/core/timeline.h"

int main() {
  using namespace distml;
  constexpr int kSpans = 1'000'000, kTrials = 7;
  std::vector<double> on, off;
  for (int trial = 0; trial < kTrials; ++trial) {
    Timeline timeline(0);
    Timeline::Lane* lane = &timeline.lane("main");
    auto start = Clock::now();
    for (int i = 0; i < kSpans; ++i) Span span(lane, "step", "step", i);
    on.push_back(seconds_since(start) / kSpans * 1e9);
    Timeline::Lane* none = nullptr;
    start = Clock::now();
    for (int i = 0; i < kSpans; ++i) {
      Span span(none, "step", "step", i);
      asm volatile("" ::: "memory");  // keep the loop: the null check is what is measured
    }
    off.push_back(seconds_since(start) / kSpans * 1e9);
  }
  std::sort(on.begin(), on.end());
  std::sort(off.begin(), off.end());
  std::printf("{\"bench\": \"span_cost\", \"ns_per_span_on\": %.1f, \"ns_per_span_off\": %.2f}\n",
              on[kTrials / 2], off[kTrials / 2]);
}
