#include "distml/core/timeline.h"

#include <cstdio>

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

}  // namespace

Timeline::Lane& Timeline::lane(std::string_view name) {
  std::lock_guard lock(mutex_);
  for (Lane& l : lanes_)
    if (l.name() == name) return l;
  return lanes_.emplace_back(std::string(name));
}

std::string Timeline::events_json() const {
  std::lock_guard lock(mutex_);
  const std::string pid = std::to_string(rank_);
  std::string out = metadata("process_name", rank_, 0, "rank " + pid);
  // Ranks in order, lanes in the order they were made ("main" first in the trainer).
  out += ",{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":" + pid +
         ",\"tid\":0,\"args\":{\"sort_index\":" + pid + "}}";
  for (std::size_t tid = 0; tid < lanes_.size(); ++tid) {
    const Lane& lane = lanes_[tid];
    out += "," + metadata("thread_name", rank_, static_cast<int>(tid), lane.name());
    out += ",{\"ph\":\"M\",\"name\":\"thread_sort_index\",\"pid\":" + pid +
           ",\"tid\":" + std::to_string(tid) + ",\"args\":{\"sort_index\":" + std::to_string(tid) +
           "}}";
    const std::string head = ",\"pid\":" + pid + ",\"tid\":" + std::to_string(tid) + ",\"ts\":";
    for (const Event& e : lane.events()) {
      out += ",{\"ph\":\"X\",\"name\":";
      out += quoted(e.name);
      out += head;
      out += micros(e.start_ns - origin_ns_);
      out += ",\"dur\":";
      out += micros(e.duration_ns);
      if (e.arg_name) {
        out += ",\"args\":{";
        out += quoted(e.arg_name);
        out += ":" + std::to_string(e.arg) + "}";
      }
      out += "}";
    }
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
