// A rank's timeline: spans (forward, backward, a bucket's all-reduce, ...) recorded in memory
// and written as Chrome-trace / Perfetto JSON (the Trace Event Format: complete events "X"
// with ts and dur in microseconds, pid = rank, tid = lane). comm/timeline_exchange.h aligns
// the ranks' clocks and gathers their events into one file.
//
// Cost: code holds a `Timeline::Lane*` that is null when no timeline is recorded, so a span
// costs a null check. When on, a span is two clock reads and one push onto its lane's vector.
// Each lane has one writer (the thread that records onto it), so recording takes no lock;
// only lane() does, once per lane. The events are read (events_json()) after every writer
// has finished.
//
// Streaming (stream_to): each lane's writer also appends its new events to a file of JSON
// lines, itself, at most four times a second (when a span ends 0.25 s or more after its lane's
// last append), under the file's lock; so a process killed outright leaves its trace up to
// about a quarter of a second before the kill, and a lane's events are only ever read by its
// writer. A lane that records nothing more keeps its last spans until flush_stream().
#pragma once

#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "distml/core/clock.h"

namespace distml {

class Timeline {
 public:
  /// One span. `name` and `arg_name` must outlive the timeline (string literals).
  struct Event {
    const char* name;
    std::int64_t start_ns;     // this rank's steady clock
    std::int64_t duration_ns;  // >= 0
    const char* arg_name;      // null: no argument
    std::int64_t arg;
  };

  /// A row of the trace ("main", "bucket 0", "actor"): one writer thread at a time.
  class Lane {
   public:
    Lane(std::string name, Timeline& owner, int tid)
        : name_(std::move(name)), owner_(owner), tid_(tid) {
      events_.reserve(1024);
    }
    /// Records [start, end) (end before start is recorded with duration 0).
    void add(const char* name, Clock::time_point start, Clock::time_point end,
             const char* arg_name = nullptr, std::int64_t arg = 0) {
      add_ns(name, ns(start), ns(end), arg_name, arg);
    }
    void add_ns(const char* name, std::int64_t start_ns, std::int64_t end_ns,
                const char* arg_name = nullptr, std::int64_t arg = 0) {
      events_.push_back({name, start_ns, end_ns > start_ns ? end_ns - start_ns : 0, arg_name, arg});
      if (end_ns >= next_stream_ns_ && owner_.streaming()) stream();
    }
    const std::string& name() const { return name_; }
    const std::vector<Event>& events() const { return events_; }
    /// Appends the events not streamed yet to the stream (by this lane's writer, or once it
    /// has finished).
    void stream();

   private:
    std::string name_;
    Timeline& owner_;
    int tid_;
    std::vector<Event> events_;
    std::size_t streamed_ = 0;         // events_[0, streamed_) are in the stream
    std::int64_t next_stream_ns_ = 0;  // the next span ending from here on streams
  };

  /// Event times are written relative to `origin_ns` (this rank's clock reading at rank 0's
  /// start, see timeline_exchange.h); `clock_error_ns` is the alignment's error bound.
  explicit Timeline(int rank, std::int64_t origin_ns = ns(Clock::now()),
                    std::int64_t clock_error_ns = 0)
      : rank_(rank), origin_ns_(origin_ns), clock_error_ns_(clock_error_ns) {}
  ~Timeline();
  Timeline(const Timeline&) = delete;
  Timeline& operator=(const Timeline&) = delete;

  /// The lane called `name`, made on first use; the reference stays valid. Thread-safe.
  Lane& lane(std::string_view name);

  int rank() const { return rank_; }
  std::int64_t origin_ns() const { return origin_ns_; }
  std::int64_t clock_error_ns() const { return clock_error_ns_; }

  /// This rank's trace events, comma-separated (a fragment of the traceEvents array): the
  /// metadata naming the process "rank N" and each lane, then every span. Call once every
  /// writer has finished.
  std::string events_json() const;

  /// From now on the events are also appended to `path` (created or emptied), one trace event
  /// per line: the metadata first, then each lane's spans at most 0.25 s after they end
  /// (above). Call before any lane is made. Makes the folder; where the file cannot be made,
  /// warns on stderr and streams nothing.
  void stream_to(const std::string& path);
  bool streaming() const { return stream_fd_ >= 0; }
  /// Streams what every lane has not streamed yet; call once every writer has finished.
  void flush_stream();

  static std::int64_t ns(Clock::time_point t) {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
  }

 private:
  int rank_;
  std::int64_t origin_ns_, clock_error_ns_;
  mutable std::mutex mutex_;  // guards lanes_ (not the lanes' events) and the stream's writes
  std::deque<Lane> lanes_;    // a deque: lane() hands out references that must stay valid
  int stream_fd_ = -1;

  void append_to_stream(const std::string& lines);
};

/// The lane `name` of `timeline`, or null when there is no timeline.
inline Timeline::Lane* lane_of(Timeline* timeline, std::string_view name) {
  return timeline ? &timeline->lane(name) : nullptr;
}

/// Records its own lifetime onto `lane` as the span `name`; does nothing when `lane` is null.
class Span {
 public:
  Span(Timeline::Lane* lane, const char* name, const char* arg_name = nullptr, std::int64_t arg = 0)
      : lane_(lane), name_(name), arg_name_(arg_name), arg_(arg) {
    if (lane_) start_ = Clock::now();
  }
  ~Span() {
    if (lane_) lane_->add(name_, start_, Clock::now(), arg_name_, arg_);
  }
  Span(const Span&) = delete;
  Span& operator=(const Span&) = delete;

 private:
  Timeline::Lane* lane_;
  const char* name_;
  const char* arg_name_;
  std::int64_t arg_;
  Clock::time_point start_;
};

/// The trace file's text: {"traceEvents": [the fragments of every rank], "displayTimeUnit":
/// "ms", "otherData": {...}}. `other_data` is a JSON object's text ("{}" for none).
std::string trace_file_text(const std::vector<std::string>& rank_fragments,
                            const std::string& other_data);

}  // namespace distml
