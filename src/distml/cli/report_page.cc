#include "report_page.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>

#include "distml/core/config_schema.h"
#include "distml/core/error.h"
#include "distml/core/installed_path.h"

namespace distml::cli {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

// The versions scripts/setup.sh installs; the page names them.
constexpr const char* kVega = "vega/build/vega.min.js";
constexpr const char* kVegaLite = "vega-lite/build/vega-lite.min.js";

std::string read_script(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  // Inside <script>, "</script" would end the element. The bundles have none; were one in a
  // string, "<\/script" would be the same text to JavaScript (any other "</" must stay: in a
  // regular expression or a comparison it is code).
  std::string s = text.str();
  for (std::size_t at = 0; (at = s.find("</script", at)) != std::string::npos; at += 3)
    s.replace(at, 2, "<\\/");
  return s;
}

// 6 significant digits ("%g"), but whole numbers of a million and more in full (5335090, not
// 5.33509e+06).
std::string number_text(const json& v) {
  if (v.is_number_integer() || v.is_number_unsigned()) return v.dump();
  const double x = v.get<double>();
  char text[40];
  std::snprintf(text, sizeof text, std::fabs(x) >= 1e6 && std::fabs(x) < 1e15 ? "%.0f" : "%.6g", x);
  return text;
}

std::string cell(const RunRecord& r, const std::string& key, const json& v) {
  std::string attrs =
      " data-run=\"" + html_escape(r.name) + "\" data-key=\"" + html_escape(key) + "\"";
  if (v.is_null()) return "<td" + attrs + ">&ndash;</td>";
  if (v.is_number())
    return "<td class=\"num\"" + attrs + " data-value=\"" + v.dump() + "\">" + number_text(v) +
           "</td>";
  const std::string text = v.is_string() ? v.get<std::string>() : v.dump();
  return "<td" + attrs + ">" + html_escape(text) + "</td>";
}

// What the table shows before the done lines' own keys.
json derived(const RunRecord& r, const std::string& key) {
  const json& d = r.done;
  auto num = [&](const char* k) { return d.is_object() && d.contains(k) && d[k].is_number(); };
  if (key == "final_train_loss") {
    for (auto e = r.events.rbegin(); e != r.events.rend(); ++e)
      if ((*e)["event"] == "step" && e->contains("loss")) return (*e)["loss"];
    return nullptr;
  }
  if (key == "bytes_per_step" && num("bytes_sent") && num("steps") && d["steps"] > 0)
    return d["bytes_sent"].get<double>() / d["steps"].get<double>();
  if (key == "hidden_comm_s" && num("comm_time_s") && num("overlap_fraction"))
    return d["comm_time_s"].get<double>() * d["overlap_fraction"].get<double>();
  return nullptr;
}

// A run's config.toml as "section.key" -> its value's text; empty where there is none or it
// does not parse (the page still shows the file).
std::map<std::string, std::string> settings_of(const RunRecord& r) {
  std::map<std::string, std::string> out;
  if (r.config.empty()) return out;
  toml::table doc;
  try {
    doc = config::parse_document(r.config, r.dir + "/config.toml");
  } catch (const std::exception&) {
    return out;
  }
  const std::function<void(const toml::table&, const std::string&)> walk =
      [&](const toml::table& t, const std::string& prefix) {
        for (const auto& [key, node] : t) {
          const std::string name = prefix + std::string(key.str());
          if (const auto* inner = node.as_table()) {
            walk(*inner, name + ".");
            continue;
          }
          const auto* text = node.as_string();  // a name as itself, not quoted
          out[name] = text ? text->get() : config::describe(node);
        }
      };
  walk(doc, "");
  return out;
}

// The table's rows of the settings on which the runs differ (set in some runs only, or to
// different values): what makes them differ, before what they measured.
std::string differing_settings(const std::vector<RunRecord>& runs) {
  if (runs.size() < 2) return {};
  std::vector<std::map<std::string, std::string>> settings;
  std::set<std::string> keys;
  for (const RunRecord& r : runs) {
    settings.push_back(settings_of(r));
    for (const auto& [k, v] : settings.back()) keys.insert(k);
  }
  std::string rows;
  for (const std::string& key : keys) {
    const auto value = [&](std::size_t i) {
      const auto it = settings[i].find(key);
      return it == settings[i].end() ? json(nullptr) : json(it->second);
    };
    bool differs = false;
    for (std::size_t i = 1; i < runs.size(); ++i) differs = differs || value(i) != value(0);
    if (!differs) continue;
    rows += "<tr class=\"setting\"><th>" + html_escape(key) + "</th>";
    for (std::size_t i = 0; i < runs.size(); ++i) rows += cell(runs[i], key, value(i));
    rows += "</tr>\n";
  }
  return rows;
}

}  // namespace

std::string html_escape(const std::string& text) {
  std::string out;
  for (char c : text) switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  return out;
}

PlotScripts load_plot_scripts() {
  const char* from_env = std::getenv("DISTML_VEGA_DIR");
  const fs::path dir = from_env ? from_env : installed_or_source("node_modules", DISTML_VEGA_DIR);
  std::error_code ec;
  for (const char* file : {kVega, kVegaLite})
    if (!fs::is_regular_file(dir / file, ec))
      throw UsageError(cat("distml report: the plotting library is missing: no ",
                           (dir / file).string(),
                           ". scripts/setup.sh (make setup) installs vega and vega-lite from npm "
                           "into ",
                           DISTML_VEGA_DIR,
                           "; or set DISTML_VEGA_DIR to a node_modules "
                           "folder that has them"));
  return {read_script(dir / kVega), read_script(dir / kVegaLite)};
}

std::string comparison_table(const std::vector<RunRecord>& runs) {
  std::vector<std::string> keys = {"final_train_loss", "bytes_per_step", "hidden_comm_s"};
  const std::size_t derived_keys = keys.size();
  for (const RunRecord& r : runs)
    if (r.done.is_object())
      for (const auto& [k, v] : r.done.items())
        if (k != "event" && std::find(keys.begin(), keys.end(), k) == keys.end()) keys.push_back(k);
  std::string t = "<table id=\"comparison\">\n<tr><th>done line</th>";
  for (const RunRecord& r : runs)
    t += "<th data-run=\"" + html_escape(r.name) + "\">" + html_escape(r.name) + "</th>";
  t += "</tr>\n" + differing_settings(runs);
  for (std::size_t i = 0; i < keys.size(); ++i) {
    std::string row = "<tr><th>" + html_escape(keys[i]) + "</th>";
    bool any = false;
    for (const RunRecord& r : runs) {
      json v = i < derived_keys                                 ? derived(r, keys[i])
               : r.done.is_object() && r.done.contains(keys[i]) ? r.done[keys[i]]
                                                                : json(nullptr);
      any = any || !v.is_null();
      row += cell(r, keys[i], v);
    }
    if (any) t += row + "</tr>\n";
  }
  return t + "</table>\n";
}

std::string report_page(const std::vector<RunRecord>& runs, const std::vector<Chart>& charts,
                        const PlotScripts& scripts) {
  std::string page =
      "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
      "<title>distml report</title>\n<style>\n"
      "body{font-family:sans-serif;margin:24px;color:#222}"
      "table{border-collapse:collapse;margin:8px 0}"
      "td,th{border:1px solid #ccc;padding:3px 8px;text-align:left}"
      "td.num{text-align:right;font-variant-numeric:tabular-nums}"
      ".chart{margin:12px 0}.error{color:#b00}pre{background:#f6f6f6;padding:8px}\n"
      "</style>\n<script>" +
      scripts.vega + "</script>\n<script>" + scripts.vega_lite +
      "</script>\n</head><body>\n<h1>distml report</h1>\n<h2>Runs</h2>\n<ul>\n";
  for (const RunRecord& r : runs) {
    page += "<li><b>" + html_escape(r.name) + "</b>: " + html_escape(r.dir);
    if (!r.done.is_object()) page += " <span class=\"error\">(stopped before its done line)</span>";
    if (!r.config.empty())
      page += "<details><summary>config.toml</summary><pre>" + html_escape(r.config) +
              "</pre></details>";
    page += "</li>\n";
  }
  page += "</ul>\n<h2>Comparison</h2>\n" + comparison_table(runs);
  json specs = json::array();
  std::string section;
  for (std::size_t i = 0; i < charts.size(); ++i) {
    if (charts[i].section != section)
      page += "<h2>" + html_escape(section = charts[i].section) + "</h2>\n";
    const std::string id = "chart-" + std::to_string(i);
    page += "<div class=\"chart\" id=\"" + id + "\" data-title=\"" + html_escape(charts[i].title) +
            "\"></div>\n";
    specs.push_back({{"id", id}, {"spec", charts[i].spec}});
  }
  std::string spec_text = specs.dump();
  for (std::size_t at = 0; (at = spec_text.find("</", at)) != std::string::npos; at += 3)
    spec_text.replace(at, 2, "<\\/");  // "\/" is "/" to JSON
  // Each plot says when it has rendered (data-rendered) or why it failed (data-error, shown);
  // <body data-plots-done> once all have settled.
  page +=
      "<script type=\"application/json\" id=\"chart-specs\">" + spec_text +
      "</script>\n<script>\n"
      "const charts = JSON.parse(document.getElementById('chart-specs').textContent);\n"
      "Promise.allSettled(charts.map(c => {\n"
      "  const el = document.getElementById(c.id);\n"
      "  return Promise.resolve()\n"
      "    .then(() => new vega.View(vega.parse(vegaLite.compile(c.spec).spec),\n"
      "                              {renderer: 'svg', container: el, hover: true}).runAsync())\n"
      "    .then(() => { el.dataset.rendered = 'true'; })\n"
      "    .catch(e => { el.dataset.error = String(e); el.className += ' error';\n"
      "                  el.textContent = 'This plot failed: ' + e; });\n"
      "})).then(() => { document.body.dataset.plotsDone = 'true'; });\n"
      "</script>\n</body></html>\n";
  return page;
}

}  // namespace distml::cli
