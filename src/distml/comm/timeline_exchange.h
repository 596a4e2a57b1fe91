// Every rank's timeline (core/timeline.h) in one trace file: the ranks' clocks aligned with
// rank 0's at start, their events gathered to rank 0 at the end.
//
// Clock alignment (Cristian's algorithm), collective, once at start:
//  1. Rank 0 reads its clock: t0, the trace's time zero.
//  2. For each rank r > 0 in turn, kAlignRounds times: r reads its clock (a), sends rank 0 a
//     ping; rank 0 answers with its clock minus t0; r reads its clock again (b). Rank 0 read its
//     clock at some moment between a and b, so t0 on r's clock is (a + b) / 2 - answer, within
//     (b - a) / 2. The round with the shortest round trip is kept.
// The bound (b - a) / 2 is written per rank into the file ("otherData": "clock_error_us"):
// tens of microseconds between hosts, a few on one. It holds at the start; clocks of different
// hosts then drift apart by their rates' difference (NTP keeps it to tens of ppm: 0.1 ms after
// 10 s). Ranks on one host share one monotonic clock, so for them the offset measured is that
// error alone and there is no drift.
//
// Gathering, at the end: every rank r > 0 sends rank 0 its events (as trace-event JSON, times
// already relative to t0); rank 0 writes the file. Rank 0 waits at most the communicator's
// timeout in all (at least 1 s per rank): a rank that never sends is left out and named in the
// file ("missing_ranks") and on stderr.
//
// Streaming, meanwhile: each rank appends its events to a file of its own as it goes
// (stream_path(); core/timeline.h), so that a run that fails or is killed outright keeps every
// rank's trace up to a fraction of a second before the end. A clean end removes them once the trace
// file is written. A restart (attempt k > 0) writes its own files (attempt_path()), so that
// no attempt's trace overwrites another's; `distml report` reads them all.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "distml/comm/communicator.h"
#include "distml/core/timeline.h"

namespace distml::comm {

inline constexpr int kAlignRounds = 8;

struct ClockAlignment {
  std::int64_t origin_ns = 0;  // rank 0's t0 on this rank's clock
  std::int64_t error_ns = 0;   // |origin_ns - the true value| <= error_ns (0 on rank 0)
};

/// Collective: rank 0's t0 on this rank's clock (above). `now_ns` reads this rank's clock in
/// nanoseconds (a parameter so that tests can shift it).
ClockAlignment align_clocks(Communicator& comm, const std::function<std::int64_t()>& now_ns);

/// Collective: gathers `timeline` of every rank; rank 0 writes the trace file at `path`
/// (CheckpointError when it cannot). Ranks that do not arrive in time are left out.
void gather_timeline(const Timeline& timeline, Communicator& comm, const std::string& path);

/// The trace file of attempt `attempt` of a run whose trace goes to `path`: `path` itself for
/// the first, "timeline.attempt2.json" for "timeline.json" and attempt 2.
std::string attempt_path(const std::string& path, int attempt);

/// The file rank `rank` streams its events to during attempt `attempt`:
/// "timeline.json.attempt0.rank1.jsonl", one trace event per line.
std::string stream_path(const std::string& path, int attempt, int rank);

/// A run's timeline, from clock alignment to file. With an empty path it records nothing and
/// timeline() is null.
class TimelineRecording {
 public:
  /// Collective when `path` is set (every rank must pass a path, or none): aligns the clocks
  /// and starts this rank's stream. `attempt`: the restarts before this start.
  TimelineRecording(Communicator& comm, std::string path, int attempt = 0);
  /// Without finish() (the run failed), the stream keeps the events up to here.
  ~TimelineRecording();
  TimelineRecording(const TimelineRecording&) = delete;
  TimelineRecording& operator=(const TimelineRecording&) = delete;

  Timeline* timeline() { return timeline_.get(); }
  /// Collective: gathers every rank's events into the file (gather_timeline).
  void finish();

 private:
  Communicator& comm_;
  std::string path_;     // this attempt's trace file
  std::string stream_;   // this rank's stream
  std::string streams_;  // every rank's, as a pattern for messages
  std::unique_ptr<Timeline> timeline_;
  bool finished_ = false;
};

}  // namespace distml::comm
