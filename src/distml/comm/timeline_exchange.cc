#include "distml/comm/timeline_exchange.h"

#include <algorithm>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <limits>
#include <vector>

#include "distml/core/atomic_file.h"
#include "distml/core/error.h"

namespace distml::comm {
namespace {

// Point-to-point tags of the alignment and the gathering (no other traffic uses them).
constexpr int kPingTag = 0x54E0, kAnswerTag = 0x54E1, kSizeTag = 0x54E2, kEventsTag = 0x54E3;

ConstBuffer one(const std::int64_t& v) { return {&v, 1, DType::i64}; }
Buffer one(std::int64_t& v) { return {&v, 1, DType::i64}; }

std::string microseconds(std::int64_t ns) { return cat(static_cast<double>(ns) / 1000); }

// "otherData": how the clocks were aligned, each rank's error bound (null: no events), and
// what is missing.
std::string other_data(const std::vector<std::int64_t>& error_ns, const std::vector<int>& missing,
                       const std::string& note) {
  std::string errors, absent;
  for (std::size_t r = 0; r < error_ns.size(); ++r)
    errors += cat(r ? "," : "", error_ns[r] < 0 ? "null" : microseconds(error_ns[r]));
  for (std::size_t i = 0; i < missing.size(); ++i) absent += cat(i ? "," : "", missing[i]);
  return cat("{\"clock_alignment\":\"Cristian's algorithm against rank 0 at start, best of ",
             kAlignRounds, " round trips\",\"clock_error_us\":[", errors, "],\"missing_ranks\":[",
             absent, "]", note.empty() ? "" : ",\"note\":\"" + note + "\"", "}");
}

}  // namespace

ClockAlignment align_clocks(Communicator& comm, const std::function<std::int64_t()>& now_ns) {
  ClockAlignment out;
  if (comm.rank() == 0) {
    out.origin_ns = now_ns();  // 1.
    for (int r = 1; r < comm.size(); ++r) {
      for (int i = 0; i < kAlignRounds; ++i) {  // 2., rank 0's side
        std::int64_t ping = 0;
        comm.recv(one(ping), r, kPingTag);
        const std::int64_t answer = now_ns() - out.origin_ns;
        comm.send(one(answer), r, kAnswerTag);
      }
    }
    return out;
  }
  std::int64_t best = std::numeric_limits<std::int64_t>::max();
  for (int i = 0; i < kAlignRounds; ++i) {  // 2., rank r's side
    const std::int64_t ping = i, a = now_ns();
    comm.send(one(ping), 0, kPingTag);
    std::int64_t answer = 0;
    comm.recv(one(answer), 0, kAnswerTag);
    const std::int64_t b = now_ns();
    if (b - a >= best) continue;
    best = b - a;
    out.origin_ns = a + (b - a) / 2 - answer;
    out.error_ns = (b - a + 1) / 2;
  }
  return out;
}

void gather_timeline(const Timeline& timeline, Communicator& comm, const std::string& path) {
  std::string mine = timeline.events_json();
  if (comm.rank() != 0) {
    const std::int64_t head[2] = {static_cast<std::int64_t>(mine.size()),
                                  timeline.clock_error_ns()};
    try {
      comm.send({head, 2, DType::i64}, 0, kSizeTag);
      comm.send({mine.data(), mine.size(), DType::u8}, 0, kEventsTag);
    } catch (const Error& e) {  // rank 0 writes what it has; this rank's run did not fail
      std::fprintf(stderr, "distml: rank %d: the timeline's events did not reach rank 0: %s\n",
                   comm.rank(), e.what());
    }
    return;
  }
  std::vector<std::string> parts{std::move(mine)};
  std::vector<std::int64_t> errors(comm.size(), -1);
  errors[0] = 0;
  std::vector<int> missing;
  // Buffers of receives that timed out stay alive until the end: a late message lands there.
  std::deque<std::vector<std::int64_t>> heads;
  std::deque<std::string> texts;
  const auto deadline = Clock::now() + comm.options().timeout;
  const auto budget = [&] {
    return std::max(Millis(1000), std::chrono::duration_cast<Millis>(deadline - Clock::now()));
  };
  for (int r = 1; r < comm.size(); ++r) {
    try {
      auto& head = heads.emplace_back(2, 0);
      comm.irecv({head.data(), 2, DType::i64}, r, kSizeTag).wait(budget());
      if (head[0] < 0 || head[0] > (std::int64_t{1} << 36))
        throw CommError(cat("rank ", r, " announced ", head[0], " bytes of timeline"));
      auto& text = texts.emplace_back(static_cast<std::size_t>(head[0]), '\0');
      comm.irecv({text.data(), text.size(), DType::u8}, r, kEventsTag).wait(budget());
      parts.push_back(text);
      errors[r] = head[1];
    } catch (const Error& e) {
      missing.push_back(r);
      std::fprintf(stderr, "distml: the timeline %s lacks rank %d: %s\n", path.c_str(), r,
                   e.what());
    }
  }
  write_file_atomically(path, {trace_file_text(parts, other_data(errors, missing, ""))});
}

std::string attempt_path(const std::string& path, int attempt) {
  if (attempt == 0) return path;
  const std::filesystem::path p(path);
  return (p.parent_path() / cat(p.stem().string(), ".attempt", attempt, p.extension().string()))
      .string();
}

std::string stream_path(const std::string& path, int attempt, int rank) {
  return cat(path, ".attempt", attempt, ".rank", rank, ".jsonl");
}

TimelineRecording::TimelineRecording(Communicator& comm, std::string path, int attempt)
    : comm_(comm), path_(attempt_path(path, attempt)) {
  if (path.empty()) return;
  const auto aligned = align_clocks(comm, [] { return Timeline::ns(Clock::now()); });
  timeline_ = std::make_unique<Timeline>(comm.rank(), aligned.origin_ns, aligned.error_ns);
  stream_ = stream_path(path, attempt, comm.rank());
  streams_ = cat(path, ".attempt", attempt, ".rank*.jsonl");
  timeline_->stream_to(stream_);
}

TimelineRecording::~TimelineRecording() {
  if (!timeline_ || finished_) return;
  timeline_->flush_stream();
  if (comm_.rank() == 0)
    std::fprintf(stderr, "distml: the run ended early; each rank's timeline up to here is in %s\n",
                 streams_.c_str());
}

void TimelineRecording::finish() {
  if (!timeline_ || finished_) return;
  finished_ = true;  // the destructor has nothing left to do, even if writing fails
  timeline_->flush_stream();
  gather_timeline(*timeline_, comm_, path_);
  std::error_code ignored;
  std::filesystem::remove(stream_, ignored);  // the trace file holds it all now
}

}  // namespace distml::comm
