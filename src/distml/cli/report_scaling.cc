#include "report_scaling.h"

#include <fstream>
#include <set>

#include "distml/core/error.h"

namespace distml::cli {

using nlohmann::json;

Predictions read_predictions(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw DataError(cat(path, ": cannot read it"));
  Predictions p;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    json j;
    try {
      j = json::parse(line);
    } catch (const json::parse_error&) {
    }
    if (!j.is_object())
      throw DataError(cat(path, ":", number, ": not a JSON line of distml simulate --json"));
    const auto event = j.value("event", "");
    if (event == "done") {
      p.label = j.value("label", path);
      continue;
    }
    if (event != "prediction") continue;
    for (const char* key : {"ranks", "step_s", "efficiency"})
      if (!j.contains(key) || !j[key].is_number())
        throw DataError(cat(path, ":", number, ": a prediction without a number \"", key, "\""));
    p.rows.push_back(
        {{"ranks", j["ranks"]}, {"step_s", j["step_s"]}, {"efficiency", j["efficiency"]}});
  }
  if (p.rows.empty() || p.label.empty())
    throw DataError(cat(path,
                        ": no prediction lines and done line (distml simulate --json "
                        "writes them)"));
  return p;
}

void add_scaling(std::vector<Chart>& charts, const std::vector<RunRecord>& runs,
                 const std::vector<Predictions>& predicted) {
  if (predicted.empty()) return;
  json rows = json::array(), measured = json::array(), names = json::array();
  for (const Predictions& p : predicted) {
    names.push_back(p.label);
    for (json row : p.rows) {
      row["what"] = p.label;
      rows.push_back(std::move(row));
    }
  }
  for (const RunRecord& r : runs) {
    const json& d = r.done;
    if (!d.is_object() || !d.contains("np") || !d.contains("steps_per_sec") ||
        !d["np"].is_number() || !d["steps_per_sec"].is_number() ||
        d["steps_per_sec"].get<double>() <= 0)
      continue;
    names.push_back(r.name);
    measured.push_back(
        {{"what", r.name}, {"ranks", d["np"]}, {"step_s", 1 / d["steps_per_sec"].get<double>()}});
  }
  const json colour = {{"field", "what"},
                       {"type", "nominal"},
                       {"scale", {{"domain", names}}},
                       {"title", "strategy or run"}};
  // Ranks on a log2 scale, ticked at the sizes there are.
  std::set<double> sizes;
  for (const auto* set : {&rows, &measured})
    for (const json& row : *set) sizes.insert(row["ranks"].get<double>());
  const auto axis = [&](const char* field, const char* title, bool ranks) {
    json a = {{"field", field}, {"type", "quantitative"}, {"title", title}};
    if (ranks) {
      a["scale"] = {{"type", "log"}, {"base", 2}};
      a["axis"] = {{"values", sizes}, {"format", "d"}};
    }
    return a;
  };
  auto panel = [&](const char* y, const char* title, bool with_runs) {
    json layers = json::array({{{"data", {{"values", rows}}},
                                {"mark", {{"type", "line"}, {"point", true}, {"tooltip", true}}},
                                {"encoding",
                                 {{"x", axis("ranks", "ranks", true)},
                                  {"y", axis(y, title, false)},
                                  {"color", colour}}}}});
    if (with_runs && !measured.empty())
      layers.push_back({{"data", {{"values", measured}}},
                        {"mark",
                         {{"type", "point"},
                          {"filled", true},
                          {"size", 80},
                          {"shape", "diamond"},
                          {"tooltip", true}}},
                        {"encoding",
                         {{"x", axis("ranks", "ranks", true)},
                          {"y", axis(y, title, false)},
                          {"color", colour}}}});
    return json{{"width", 360}, {"height", 200}, {"layer", std::move(layers)}};
  };
  const std::string title = "scaling: predicted step and efficiency against ranks";
  charts.push_back(
      {"Scaling (predicted)",
       title,
       {{"$schema", "https://vega.github.io/schema/vega-lite/v6.json"},
        {"title", title},
        {"hconcat",
         {panel("step_s", "step (s)", true), panel("efficiency", "efficiency", false)}}}});
}

}  // namespace distml::cli
