#include "report_charts.h"

#include <set>

namespace distml::cli {
namespace {

using nlohmann::json;

constexpr const char* kSchema = "https://vega.github.io/schema/vega-lite/v6.json";
constexpr int kPanelWidth = 360, kPanelHeight = 200;

// One colour per run, the same in every plot.
json run_colour(const std::vector<RunRecord>& runs) {
  json names = json::array();
  for (const RunRecord& r : runs) names.push_back(r.name);
  return {{"field", "run"}, {"type", "nominal"}, {"scale", {{"domain", names}}}};
}

bool has_number(const json& object, const std::string& key) {
  return object.is_object() && object.contains(key) && object[key].is_number();
}

// What a plot of a metric over a run's course shows: `metric` of the events named `event`
// against `x` (and against wall time), plus the done line's final value at `done_x`.
struct Course {
  std::string event, x, metric;
  std::string done_x;  // empty: the done line adds no point
};

json course_rows(const std::vector<RunRecord>& runs, const Course& c) {
  json rows = json::array();
  for (const RunRecord& r : runs) {
    // A finished run whose done line lacks the metric does not measure it (accuracy in a
    // regression's eval events).
    if (!c.done_x.empty() && r.done.is_object() && !r.done.contains(c.metric)) continue;
    for (const json& e : r.events) {
      if (e["event"] != c.event || !has_number(e, c.x) || !has_number(e, c.metric)) continue;
      json row = {{"run", r.name}, {c.x, e[c.x]}, {c.metric, e[c.metric]}};
      if (has_number(e, "time_s")) row["time_s"] = e["time_s"];
      rows.push_back(std::move(row));
    }
    if (!c.done_x.empty() && has_number(r.done, c.metric) && has_number(r.done, c.done_x))
      rows.push_back({{"run", r.name},
                      {c.x, r.done[c.done_x]},
                      {c.metric, r.done[c.metric]},
                      {"time_s", r.done_time_s}});
  }
  return rows;
}

json line_panel(const std::string& x, const std::string& x_title, const std::string& y,
                const json& colour) {
  return {{"width", kPanelWidth},
          {"height", kPanelHeight},
          {"mark", {{"type", "line"}, {"point", true}, {"tooltip", true}}},
          {"encoding",
           {{"x", {{"field", x}, {"type", "quantitative"}, {"title", x_title}}},
            {"y", {{"field", y}, {"type", "quantitative"}, {"scale", {{"zero", false}}}}},
            {"color", colour}}}};
}

// The metric against steps (left) and seconds since the run started (right).
void add_course(std::vector<Chart>& charts, const std::string& section, const std::string& title,
                const std::vector<RunRecord>& runs, const Course& c) {
  json rows = course_rows(runs, c);
  if (rows.empty()) return;
  const json colour = run_colour(runs);
  charts.push_back({section,
                    title,
                    {{"$schema", kSchema},
                     {"title", title},
                     {"data", {{"values", std::move(rows)}}},
                     {"hconcat",
                      {line_panel(c.x, c.x, c.metric, colour),
                       line_panel("time_s", "seconds since the start", c.metric, colour)}}}});
}

json bar_panel(const std::string& y, const json& colour) {
  return {{"width", 40},
          {"height", kPanelHeight},
          {"mark", {{"type", "bar"}, {"tooltip", true}}},
          {"encoding",
           {{"x", {{"field", "run"}, {"type", "nominal"}, {"sort", nullptr}}},
            {"y", {{"field", y}, {"type", "quantitative"}}},
            {"color", colour}}}};
}

// One bar per run for each of `keys` of the done lines, side by side.
void add_done_bars(std::vector<Chart>& charts, const std::string& section, const std::string& title,
                   const std::vector<RunRecord>& runs, const std::vector<std::string>& keys) {
  json rows = json::array(), panels = json::array();
  std::set<std::string> present;
  for (const RunRecord& r : runs) {
    json row = {{"run", r.name}};
    for (const std::string& k : keys)
      if (has_number(r.done, k)) {
        row[k] = r.done[k];
        present.insert(k);
      }
    if (row.size() > 1) rows.push_back(std::move(row));
  }
  for (const std::string& k : keys)
    if (present.count(k)) panels.push_back(bar_panel(k, run_colour(runs)));
  if (panels.empty()) return;
  charts.push_back({section,
                    title,
                    {{"$schema", kSchema},
                     {"title", title},
                     {"data", {{"values", std::move(rows)}}},
                     {"hconcat", std::move(panels)}}});
}

// Communication time per run, split into the share hidden behind backward and the rest.
void add_communication(std::vector<Chart>& charts, const std::string& section,
                       const std::vector<RunRecord>& runs) {
  json rows = json::array();
  for (const RunRecord& r : runs) {
    if (!has_number(r.done, "comm_time_s") || !has_number(r.done, "overlap_fraction")) continue;
    const double comm = r.done["comm_time_s"], hidden = r.done["overlap_fraction"];
    rows.push_back({{"run", r.name}, {"part", "hidden (overlapped)"}, {"seconds", comm * hidden}});
    rows.push_back({{"run", r.name}, {"part", "exposed"}, {"seconds", comm * (1 - hidden)}});
  }
  if (rows.empty()) return;
  const std::string title = "communication time (s): hidden behind backward, and exposed";
  charts.push_back({section,
                    title,
                    {{"$schema", kSchema},
                     {"title", title},
                     {"data", {{"values", std::move(rows)}}},
                     {"width", 60 * static_cast<int>(runs.size())},
                     {"height", kPanelHeight},
                     {"mark", {{"type", "bar"}, {"tooltip", true}}},
                     {"encoding",
                      {{"x", {{"field", "run"}, {"type", "nominal"}, {"sort", nullptr}}},
                       {"y", {{"field", "seconds"}, {"type", "quantitative"}, {"stack", "zero"}}},
                       {"color", {{"field", "part"}, {"type", "nominal"}}}}}}});
}

void add_bytes_per_step(std::vector<Chart>& charts, const std::string& section,
                        const std::vector<RunRecord>& runs) {
  json rows = json::array();
  for (const RunRecord& r : runs)
    if (has_number(r.done, "bytes_sent") && has_number(r.done, "steps") &&
        r.done["steps"].get<double>() > 0)
      rows.push_back(
          {{"run", r.name},
           {"bytes_per_step", r.done["bytes_sent"].get<double>() / r.done["steps"].get<double>()}});
  if (rows.empty()) return;
  const std::string title = "bytes sent per step (rank 0's model payload)";
  json spec = bar_panel("bytes_per_step", run_colour(runs));
  spec.update({{"$schema", kSchema}, {"title", title}, {"data", {{"values", std::move(rows)}}}});
  spec["width"] = 60 * static_cast<int>(runs.size());
  charts.push_back({section, title, std::move(spec)});
}

// Every span name of the runs' timelines, in order: each has the same colour in every run's
// plot (a plot's own names would take the scheme's colours in its own order).
json span_names(const std::vector<RunRecord>& runs) {
  std::set<std::string> names;
  for (const RunRecord& r : runs)
    for (const RankSeconds& t : r.timeline) names.insert(t.name);
  return json(names);
}

// Stacked bars per rank, one per lane: the seconds each event name took (timeline_breakdown.h).
void add_rank_times(std::vector<Chart>& charts, const std::string& section, const RunRecord& r,
                    const json& names) {
  if (r.timeline.empty()) return;
  json rows = json::array(), ranks = json::array();
  for (const RankSeconds& t : r.timeline) {
    rows.push_back(
        {{"rank", t.rank_name}, {"lane", t.lane}, {"name", t.name}, {"seconds", t.seconds}});
    if (ranks.empty() || ranks.back() != t.rank_name) ranks.push_back(t.rank_name);
  }
  const std::string title = "time per rank: " + r.name;
  charts.push_back(
      {section,
       title,
       {{"$schema", kSchema},
        {"title", title},
        {"data", {{"values", std::move(rows)}}},
        {"width", std::max(160, 90 * static_cast<int>(ranks.size()))},
        {"height", kPanelHeight},
        {"mark", {{"type", "bar"}, {"tooltip", true}}},
        {"encoding",
         {{"x", {{"field", "rank"}, {"type", "nominal"}, {"sort", ranks}}},
          // A bar per lane, side by side: lanes overlap in time, so their stacks do not add.
          {"xOffset", {{"field", "lane"}, {"type", "nominal"}}},
          {"y", {{"field", "seconds"}, {"type", "quantitative"}, {"stack", "zero"}}},
          // 20 colours: a training timeline has about a dozen span names.
          {"color",
           {{"field", "name"},
            {"type", "nominal"},
            {"scale", {{"scheme", "tableau20"}, {"domain", names}}}}}}}}});
}

}  // namespace

std::vector<Chart> report_charts(const std::vector<RunRecord>& runs) {
  std::vector<Chart> charts;
  const std::string learning = "Loss and accuracy", rl = "Return",
                    speed = "Throughput and communication", ranks = "Time per rank";
  add_course(charts, learning, "train loss", runs, {"step", "step", "loss", ""});
  add_course(charts, learning, "test loss", runs, {"eval", "step", "test_loss", "global_step"});
  add_course(charts, learning, "test accuracy", runs,
             {"eval", "step", "test_accuracy", "global_step"});
  add_course(charts, rl, "train return", runs, {"update", "env_steps", "train_return", ""});
  add_course(charts, rl, "evaluation return", runs,
             {"eval", "env_steps", "eval_mean_return", "env_steps"});
  add_course(charts, speed, "samples/s during the run", runs,
             {"step", "step", "samples_per_sec", ""});
  add_course(charts, speed, "environment steps/s during the run", runs,
             {"update", "env_steps", "env_steps_per_sec", ""});
  add_done_bars(charts, speed, "throughput (done line)", runs,
                {"steps_per_sec", "samples_per_sec", "env_steps_per_sec"});
  add_communication(charts, speed, runs);
  add_bytes_per_step(charts, speed, runs);
  const json names = span_names(runs);
  for (const RunRecord& r : runs) add_rank_times(charts, ranks, r, names);
  return charts;
}

}  // namespace distml::cli
