// Peak resident memory, as the operating system counts it (not what the code thinks it holds).
#pragma once

#include <sys/resource.h>

namespace distml {

/// This process's peak resident set so far, in MiB (every rank of it, on the local engine).
inline double peak_rss_mb() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024;  // kB on Linux
}

}  // namespace distml
