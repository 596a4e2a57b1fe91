#include "link_fit.h"

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "distml/core/error.h"

namespace distml::cli {

FittedLink fit_link(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw ConfigError(cat(path, ": cannot read it (distml bench sendrecv --json's output)"));
  std::map<std::int64_t, double> seconds;  // by message bytes
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (line.empty() || line[0] != '{') continue;  // bench's text between its JSON lines
    nlohmann::json row;
    try {
      row = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& e) {
      throw ConfigError(cat(path, ":", number, ": not a JSON line: ", e.what()));
    }
    // The done line ("event") names the op too.
    if (!row.is_object() || row.contains("event") || row.value("op", "") != "sendrecv") continue;
    const auto bytes = row.value("bytes", nlohmann::json());
    const auto time_us = row.value("time_us", nlohmann::json());
    if (!bytes.is_number_integer() || bytes.get<std::int64_t>() < 1 || !time_us.is_number() ||
        !(time_us.get<double>() > 0))
      throw ConfigError(
          cat(path, ":", number, ": a sendrecv row needs \"bytes\" >= 1 and \"time_us\" > 0"));
    seconds[bytes.get<std::int64_t>()] = time_us.get<double>() * 1e-6;
  }
  if (seconds.size() < 2)
    throw ConfigError(cat(path,
                          ": expected sendrecv rows of at least two sizes, from distml "
                          "bench sendrecv --sizes 4,16M --json; found ",
                          seconds.size()));
  const auto& [small, alpha] = *seconds.begin();
  const auto& [large, large_s] = *seconds.rbegin();
  if (large_s <= alpha)
    throw ConfigError(cat(path, ": the ", large, "-byte message took no longer than the ", small,
                          "-byte one: no bandwidth to fit (measure a larger message)"));
  return {alpha, static_cast<double>(large) / (large_s - alpha), small, large};
}

}  // namespace distml::cli
