#include "run_record.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <tuple>

#include "distml/core/error.h"
#include "run_dir.h"

namespace distml::cli {
namespace {

namespace fs = std::filesystem;

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw DataError(cat(path.string(), ": cannot read it"));
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// metrics.jsonl's lines, each an object with an "event" name.
std::vector<nlohmann::json> read_metrics(const fs::path& path) {
  const std::string text = read_text(path);
  std::vector<nlohmann::json> lines;
  std::size_t begin = 0;
  for (int number = 1; begin < text.size(); ++number) {
    std::size_t end = text.find('\n', begin);
    const bool cut = end == std::string::npos;  // the last line of a run that was killed
    if (cut) end = text.size();
    const std::string line = text.substr(begin, end - begin);
    begin = end + 1;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    nlohmann::json e;
    std::string why;
    try {
      e = nlohmann::json::parse(line);
      if (!e.is_object() || !e.contains("event") || !e["event"].is_string())
        why = "expected a JSON object with an \"event\" name";
    } catch (const nlohmann::json::exception& x) {
      why = cat("not valid JSON: ", x.what());
    }
    if (why.empty()) {
      lines.push_back(std::move(e));
    } else if (cut) {
      std::fprintf(stderr, "distml report: %s:%d: left out: a last line cut short (%s)\n",
                   path.string().c_str(), number, why.c_str());
    } else {
      throw DataError(cat(path.string(), ":", number, ": ", why));
    }
  }
  return lines;
}

// The number that orders a run's events: training steps, or environment steps for rl.
const nlohmann::json* progress_of(const nlohmann::json& e) {
  for (const char* key : {"step", "env_steps"}) {
    const auto it = e.find(key);
    if (it != e.end() && it->is_number()) return &*it;
  }
  return nullptr;
}

// The traces of a run's attempts (comm/timeline_exchange.h): timeline.json, a restart's
// timeline.attemptK.json, and for an attempt that wrote none (it failed, or was killed) its
// ranks' streams, timeline.json.attemptK.rankR.jsonl, read as one trace. Each with its source.
std::vector<std::pair<std::string, nlohmann::json>> read_traces(const fs::path& root) {
  static const std::regex attempt_file(R"(timeline(\.attempt(\d+))?\.json)");
  static const std::regex stream_file(R"(timeline\.json\.attempt(\d+)\.rank\d+\.jsonl)");
  std::set<std::string> whole;  // the attempts with a trace file
  std::map<std::string, std::vector<fs::path>> streams;
  std::vector<std::pair<std::string, nlohmann::json>> traces;
  std::error_code ec;
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(root, ec)) files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  for (const auto& file : files) {
    std::smatch m;
    const std::string name = file.filename().string();
    if (std::regex_match(name, m, attempt_file)) {
      whole.insert(m[2].matched ? m[2].str() : "0");
      traces.emplace_back(file.string(), parse_json_file(file));
    } else if (std::regex_match(name, m, stream_file)) {
      streams[m[1].str()].push_back(file);
    }
  }
  for (const auto& [attempt, files_of_ranks] : streams) {
    if (whole.contains(attempt)) continue;
    nlohmann::json trace = {{"traceEvents", nlohmann::json::array()}};
    for (const auto& file : files_of_ranks) {
      std::istringstream lines(read_text(file));
      int number = 0;
      for (std::string line; std::getline(lines, line);) {
        ++number;
        try {
          trace["traceEvents"].push_back(nlohmann::json::parse(line));
        } catch (const nlohmann::json::exception&) {  // the last line of a killed writer
          if (lines.peek() != EOF)
            throw DataError(cat(file.string(), ":", number, ": not a JSON trace event"));
        }
      }
    }
    traces.emplace_back(cat(root.string(), "/timeline.json.attempt", attempt, ".rank*.jsonl"),
                        std::move(trace));
  }
  return traces;
}

// Adds `more` into `total`: the seconds of the same rank, lane and event name summed, in the
// order rank_breakdown sorts them.
void add_seconds(std::vector<RankSeconds>& total, const std::vector<RankSeconds>& more) {
  for (const auto& m : more) {
    const auto same = std::find_if(total.begin(), total.end(), [&](const RankSeconds& t) {
      return t.rank == m.rank && t.lane == m.lane && t.name == m.name;
    });
    if (same != total.end())
      same->seconds += m.seconds;
    else
      total.push_back(m);
  }
  std::sort(total.begin(), total.end(), [](const RankSeconds& a, const RankSeconds& b) {
    return std::tie(a.rank, a.lane, a.name) < std::tie(b.rank, b.lane, b.name);
  });
}

}  // namespace

std::vector<nlohmann::json> resolve_restarts(const std::vector<nlohmann::json>& lines,
                                             double& clock_offset) {
  std::vector<nlohmann::json> kept;
  std::map<std::string, double> last_progress;  // by event name
  double offset = 0, last_elapsed = 0;
  for (nlohmann::json e : lines) {
    if (const auto it = e.find("elapsed_s"); it != e.end() && it->is_number()) {
      const double elapsed = it->get<double>();
      if (elapsed < last_elapsed) offset += last_elapsed;  // a new attempt's clock
      last_elapsed = elapsed;
      e["time_s"] = elapsed + offset;
    }
    if (const nlohmann::json* p = progress_of(e)) {
      const double progress = p->get<double>();
      const std::string name = e["event"];
      const auto seen = last_progress.find(name);
      if (seen != last_progress.end() && progress <= seen->second) {  // went back: a resume
        std::erase_if(kept, [&](const nlohmann::json& k) {
          const nlohmann::json* q = progress_of(k);
          return q && q->get<double>() >= progress;
        });
        last_progress.clear();
      }
      last_progress[name] = progress;
    }
    kept.push_back(std::move(e));
  }
  clock_offset = offset;
  return kept;
}

RunRecord read_run_dir(const std::string& dir) {
  const fs::path root(dir);
  std::error_code ec;
  if (!fs::is_directory(root, ec)) throw UsageError(cat(dir, ": no such folder"));
  RunRecord run;
  run.dir = dir;
  const fs::path metrics = root / kRunMetricsFile;
  if (!fs::exists(metrics, ec))
    throw DataError(cat(dir, ": not a run directory: ", kRunMetricsFile,
                        " is missing (--run-dir DIR on train, rl or fit writes it)"));
  std::vector<nlohmann::json> lines = read_metrics(metrics);
  if (lines.empty()) throw DataError(cat(metrics.string(), ": no events in it"));
  if (lines.back()["event"] == "done") {
    run.done = lines.back();
    lines.pop_back();
  }
  const fs::path done = root / kRunDoneFile;
  if (fs::exists(done, ec)) {
    run.done = parse_json_file(done);
    if (!run.done.is_object() || !run.done.contains("event") || run.done["event"] != "done")
      throw DataError(cat(done.string(), ": expected the done line, {\"event\": \"done\", ...}"));
  }
  double offset = 0;
  run.events = resolve_restarts(lines, offset);
  if (run.done.is_object() && run.done.contains("wall_s") && run.done["wall_s"].is_number())
    run.done_time_s = run.done["wall_s"].get<double>() + offset;
  if (const fs::path config = root / kRunConfigFile; fs::exists(config, ec))
    run.config = read_text(config);
  for (const auto& [source, trace] : read_traces(root)) {
    try {
      add_seconds(run.timeline, rank_breakdown(trace, source));
    } catch (const nlohmann::json::exception& e) {  // a field of another type
      throw DataError(cat(source, ": not a Chrome trace: ", e.what()));
    }
  }
  return run;
}

nlohmann::json parse_json_file(const fs::path& path) {
  try {
    return nlohmann::json::parse(read_text(path));
  } catch (const nlohmann::json::exception& e) {
    throw DataError(cat(path.string(), ": not valid JSON: ", e.what()));
  }
}

void name_runs(std::vector<RunRecord>& runs) {
  std::map<std::string, int> uses;
  for (RunRecord& run : runs) {
    fs::path path = fs::absolute(run.dir).lexically_normal();
    if (path.filename().empty()) path = path.parent_path();  // "runs/a/" is "a"
    const std::string name = path.filename().empty() ? run.dir : path.filename().string();
    const int n = ++uses[name];
    run.name = n == 1 ? name : cat(name, " (", n, ")");
  }
}

}  // namespace distml::cli
