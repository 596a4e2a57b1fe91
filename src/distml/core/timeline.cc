#include "distml/core/timeline.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "distml/core/error.h"

namespace distml {
namespace {

// A JSON string literal of `text`.
std::string quoted(std::string_view text) {
  std::string out = "\"";
  for (const char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\u%04x", c);
      out += escaped;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

// Nanoseconds as microseconds with three decimals, in integer arithmetic: exact, so that a
// span nested in another stays inside it in the file.
std::string micros(std::int64_t ns) {
  char text[32];
  const bool negative = ns < 0;
  const std::uint64_t magnitude = negative ? 0 - static_cast<std::uint64_t>(ns) : ns;
  std::snprintf(text, sizeof text, "%s%llu.%03llu", negative ? "-" : "",
                static_cast<unsigned long long>(magnitude / 1000),
                static_cast<unsigned long long>(magnitude % 1000));
  return text;
}

std::string metadata(const char* what, int pid, int tid, std::string_view name) {
  return std::string("{\"ph\":\"M\",\"name\":\"") + what + "\",\"pid\":" + std::to_string(pid) +
         ",\"tid\":" + std::to_string(tid) + ",\"args\":{\"name\":" + quoted(name) + "}}";
}

// The metadata of the process "rank N", sorted by rank: two trace events.
std::vector<std::string> process_metadata(int rank) {
  const std::string pid = std::to_string(rank);
  return {metadata("process_name", rank, 0, "rank " + pid),
          "{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":" + pid +
              ",\"tid\":0,\"args\":{\"sort_index\":" + pid + "}}"};
}

// The metadata of lane `tid`, sorted in the order the lanes were made ("main" first).
std::vector<std::string> lane_metadata(int rank, int tid, std::string_view name) {
  return {metadata("thread_name", rank, tid, name),
          "{\"ph\":\"M\",\"name\":\"thread_sort_index\",\"pid\":" + std::to_string(rank) +
              ",\"tid\":" + std::to_string(tid) +
              ",\"args\":{\"sort_index\":" + std::to_string(tid) + "}}"};
}

// `events` each followed by `end`.
std::string joined(const std::vector<std::string>& events, const char* end) {
  std::string out;
  for (const auto& e : events) out += e + end;
  return out;
}

// Appends `e` of lane `tid` as a complete event, after `separator`.
void append_event(std::string& out, const Timeline::Event& e, int rank, int tid,
                  std::int64_t origin_ns, const char* separator) {
  out += separator;
  out += "{\"ph\":\"X\",\"name\":";
  out += quoted(e.name);
  out += ",\"pid\":" + std::to_string(rank) + ",\"tid\":" + std::to_string(tid) + ",\"ts\":";
  out += micros(e.start_ns - origin_ns);
  out += ",\"dur\":";
  out += micros(e.duration_ns);
  if (e.arg_name) {
    out += ",\"args\":{";
    out += quoted(e.arg_name);
    out += ':';
    out += std::to_string(e.arg);
    out += '}';
  }
  out += '}';
}

}  // namespace

Timeline::~Timeline() {
  if (stream_fd_ >= 0) ::close(stream_fd_);
}

Timeline::Lane& Timeline::lane(std::string_view name) {
  std::lock_guard lock(mutex_);
  for (Lane& l : lanes_)
    if (l.name() == name) return l;
  const int tid = static_cast<int>(lanes_.size());
  if (streaming()) append_to_stream(joined(lane_metadata(rank_, tid, name), "\n"));
  return lanes_.emplace_back(std::string(name), *this, tid);
}

void Timeline::Lane::stream() {
  std::string lines;
  for (; streamed_ < events_.size(); ++streamed_) {
    append_event(lines, events_[streamed_], owner_.rank_, tid_, owner_.origin_ns_, "");
    lines += '\n';
  }
  next_stream_ns_ = ns(Clock::now()) + 250'000'000;
  std::lock_guard lock(owner_.mutex_);
  owner_.append_to_stream(lines);
}

void Timeline::stream_to(const std::string& path) {
  std::lock_guard lock(mutex_);
  std::error_code ignored;  // a folder that cannot be made shows as the open's error
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ignored);
  stream_fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
  if (stream_fd_ < 0) {  // the run goes on; its trace file is still written at its end
    std::fprintf(stderr, "distml: warning: cannot stream the timeline to %s (%s)\n", path.c_str(),
                 std::strerror(errno));
    return;
  }
  append_to_stream(joined(process_metadata(rank_), "\n"));
}

void Timeline::flush_stream() {
  if (!streaming()) return;
  std::vector<Lane*> lanes;
  {
    std::lock_guard lock(mutex_);
    for (Lane& l : lanes_) lanes.push_back(&l);
  }
  for (Lane* l : lanes) l->stream();
}

// A failed write loses part of the stream, not the run: the file says so by what it lacks.
void Timeline::append_to_stream(const std::string& lines) {
  std::string_view rest = lines;
  while (!rest.empty()) {
    const ssize_t n = ::write(stream_fd_, rest.data(), rest.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    rest.remove_prefix(static_cast<std::size_t>(n));
  }
}

std::string Timeline::events_json() const {
  std::lock_guard lock(mutex_);
  // The process's metadata first: every later event follows a comma.
  std::string out = joined(process_metadata(rank_), ",");
  out.pop_back();  // the comma after the last
  for (std::size_t tid = 0; tid < lanes_.size(); ++tid) {
    const Lane& lane = lanes_[tid];
    out += ',';
    out += joined(lane_metadata(rank_, static_cast<int>(tid), lane.name()), ",");
    out.pop_back();  // the comma after the last
    for (const Event& e : lane.events())
      append_event(out, e, rank_, static_cast<int>(tid), origin_ns_, ",");
  }
  return out;
}

std::string trace_file_text(const std::vector<std::string>& rank_fragments,
                            const std::string& other_data) {
  std::string out = "{\"traceEvents\":[";
  bool first = true;
  for (const auto& fragment : rank_fragments) {
    if (fragment.empty()) continue;
    if (!first) out += ",\n";
    out += fragment;
    first = false;
  }
  return out + "],\n\"displayTimeUnit\":\"ms\",\n\"otherData\":" + other_data + "}\n";
}

}  // namespace distml
