#include "timeline_breakdown.h"

#include <algorithm>
#include <map>
#include <tuple>
#include <utility>

#include "distml/core/error.h"

namespace distml::cli {
namespace {

struct Span {
  double ts, end;
  std::string name;
};

double number(const nlohmann::json& e, const char* key, const std::string& source, size_t i) {
  const auto it = e.find(key);
  if (it == e.end() || !it->is_number())
    throw DataError(cat(source, ": traceEvents[", i, "] (\"ph\": \"X\") needs a number \"", key,
                        "\", got ", e.dump()));
  return it->get<double>();
}

// An event's whole-number field (pid, tid), 0 where absent: a float there would convert with
// undefined behaviour.
long long whole(const nlohmann::json& e, const char* key, const std::string& source, size_t i) {
  const auto it = e.find(key);
  if (it == e.end()) return 0;
  if (!it->is_number_integer())
    throw DataError(
        cat(source, ": traceEvents[", i, "] needs a whole number \"", key, "\", got ", it->dump()));
  return it->get<long long>();
}

// Self time of each span of one thread, added to `seconds` by name: a span opened inside
// another (starting before it ends) is its child, and the child's time within the parent is
// taken off the parent.
void add_self_times(std::vector<Span> spans, std::map<std::string, double>& seconds) {
  std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) {
    return std::tie(a.ts, b.end) < std::tie(b.ts, a.end);  // outer spans first at equal starts
  });
  std::vector<const Span*> open;
  for (const Span& s : spans) {
    while (!open.empty() && open.back()->end <= s.ts) open.pop_back();
    seconds[s.name] += (s.end - s.ts) * 1e-6;
    if (!open.empty())
      seconds[open.back()->name] -= (std::min(s.end, open.back()->end) - s.ts) * 1e-6;
    open.push_back(&s);
  }
}

}  // namespace

std::vector<RankSeconds> rank_breakdown(const nlohmann::json& trace, const std::string& source) {
  if (!trace.is_object() || !trace.contains("traceEvents") || !trace["traceEvents"].is_array())
    throw DataError(cat(source, ": expected a Chrome trace, {\"traceEvents\": [...]}"));
  std::map<int, std::string> rank_names;
  std::map<std::pair<int, long long>, std::string> lane_names;     // (pid, tid)
  std::map<std::pair<int, long long>, std::vector<Span>> threads;  // (pid, tid)
  const auto& events = trace["traceEvents"];
  for (size_t i = 0; i < events.size(); ++i) {
    const auto& e = events[i];
    if (!e.is_object()) throw DataError(cat(source, ": traceEvents[", i, "] is not an object"));
    const std::string ph = e.value("ph", "");
    const int pid = static_cast<int>(whole(e, "pid", source, i));
    if (ph == "M" && e.value("name", "") == "process_name" && e.contains("args"))
      rank_names[pid] = e["args"].value("name", "");
    if (ph == "M" && e.value("name", "") == "thread_name" && e.contains("args"))
      lane_names[{pid, whole(e, "tid", source, i)}] = e["args"].value("name", "");
    if (ph != "X") continue;
    const double ts = number(e, "ts", source, i), dur = number(e, "dur", source, i);
    threads[{pid, whole(e, "tid", source, i)}].push_back({ts, ts + dur, e.value("name", "?")});
  }
  std::vector<RankSeconds> out;
  for (auto& [thread, spans] : threads) {
    std::map<std::string, double> seconds;
    add_self_times(std::move(spans), seconds);
    const auto [pid, tid] = thread;
    const auto named = rank_names.find(pid);
    const std::string rank_name =
        named != rank_names.end() && !named->second.empty() ? named->second : cat("rank ", pid);
    const auto lane = lane_names.find(thread);
    const std::string lane_name =
        lane != lane_names.end() && !lane->second.empty() ? lane->second : cat("thread ", tid);
    for (const auto& [name, s] : seconds) out.push_back({pid, rank_name, lane_name, name, s});
  }
  std::sort(out.begin(), out.end(), [](const RankSeconds& a, const RankSeconds& b) {
    return std::tie(a.rank, a.lane, a.name) < std::tie(b.rank, b.lane, b.name);
  });
  return out;
}

}  // namespace distml::cli
