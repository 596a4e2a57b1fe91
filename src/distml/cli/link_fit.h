// `distml simulate --link-from FILE`: a link's latency (alpha) and bandwidth (beta) fitted from
// what `distml bench sendrecv --json` measured on it, as ASTRA-sim advises: alpha from the
// smallest message, whose time is nearly all start-up, and beta from the largest, whose time
// less alpha is nearly all transfer. In a sendrecv every rank sends to the next while it
// receives from the one before, so a row's time is one message's one-way time,
// alpha + bytes / beta, on a link that carries both directions at once.
#pragma once

#include <cstdint>
#include <string>

namespace distml::cli {

struct FittedLink {
  double latency_s = 0, bytes_per_s = 0;
  std::int64_t small_bytes = 0, large_bytes = 0;  // the messages they were read from
};

/// ConfigError naming the file (and line) when it holds no sendrecv rows of two sizes, a line
/// is not JSON, or the largest message took no longer than the smallest.
FittedLink fit_link(const std::string& bench_json_path);

}  // namespace distml::cli
