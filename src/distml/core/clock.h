// The one clock durations are measured with: monotonic, in seconds as double.
#pragma once

#include <chrono>

namespace distml {

using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

/// end - start in seconds (negative when end comes first).
inline double seconds_between(Clock::time_point start, Clock::time_point end) {
  return std::chrono::duration<double>(end - start).count();
}

}  // namespace distml
