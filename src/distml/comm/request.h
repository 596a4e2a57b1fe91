// A pending point-to-point transfer or collective, as engines and the queue report it.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "distml/comm/types.h"
#include "distml/core/error.h"

namespace distml::comm {

/// One outstanding operation. Engines implement it for their transfers; destroying an
/// incomplete request cancels what can be cancelled (the process should then exit: the
/// peer may still write into the buffer).
class Request {
 public:
  virtual ~Request() = default;
  /// True once complete. Throws CommError if it failed (for example, a wrong size arrived).
  virtual bool test() = 0;
  /// Blocks until complete or `deadline`; false on timeout. Throws CommError on failure.
  virtual bool wait_until(Deadline deadline) = 0;
  /// What it waits for, for error messages: "recv from rank 2 (tag 7, 4096 bytes)".
  virtual std::string describe() const = 0;
  /// When it completed, where the request keeps that (queued collectives do, for timelines);
  /// nullopt while it runs, and for requests that do not keep it.
  virtual std::optional<Clock::time_point> completed_at() { return std::nullopt; }
};

using RequestPtr = std::unique_ptr<Request>;

/// Polls `test()` until done or `deadline`: spins briefly, then yields, then naps, so that
/// oversubscribed ranks do not starve each other.
bool poll_until(Request& request, Deadline deadline);

/// Says "recv from rank 2 (tag 7, 4096 bytes)"; shared by the engines' describe().
std::string describe_transfer(bool is_send, int peer, int tag, std::size_t bytes);

/// The error for a receive whose message did not have the size the receiver posted.
CommError size_mismatch(int src, int tag, std::size_t expected, std::size_t got);

}  // namespace distml::comm
