#include "distml/rl/envs/exec_protocol.h"

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "distml/core/error.h"

namespace distml::rl::exec_protocol {
namespace {

using Json = nlohmann::json;

// Numbers of a JSON array, flattened; false if it is not an array of numbers.
// false if it is not an array of numbers a float holds (infinities included).
bool numbers(const Json& j, std::vector<float>& out) {
  if (!j.is_array()) return false;
  for (const Json& v : j) {
    if (!v.is_number()) return false;
    const double d = v.get<double>();
    if (std::isfinite(d) && std::abs(d) > std::numeric_limits<float>::max()) return false;
    out.push_back(static_cast<float>(d));
  }
  return true;
}

// The most values a space's element may hold: far above any environment's (Humanoid's 376),
// far below what a typo in a shape would ask to allocate.
constexpr long long kLargestSpace = 1 << 24;

// The space a declaration describes: {"n": K} or {"shape": [...], "low": [...], "high": [...]}.
Space space_of(const Json& j, const char* key, bool bounds_required) {
  const std::string where = cat("its \"", key, "\"");
  if (!j.is_object()) throw EnvError(cat(where, " is not an object"));
  if (j.contains("n")) {
    if (!j["n"].is_number_integer() || j["n"].get<long long>() < 1 ||
        j["n"].get<long long>() > kLargestSpace)
      throw EnvError(cat(where, ": \"n\" must be a whole number from 1 to ", kLargestSpace));
    return Space::discrete(j["n"].get<int>());
  }
  if (!j.contains("shape") || !j["shape"].is_array() || j["shape"].empty())
    throw EnvError(cat(where, " needs \"n\" (discrete) or \"shape\" (a box)"));
  long long size = 1;
  for (const Json& d : j["shape"]) {
    if (!d.is_number_integer() || d.get<long long>() < 1)
      throw EnvError(cat(where, ": \"shape\" must hold whole numbers >= 1"));
    if (d.get<long long>() > kLargestSpace / size)
      throw EnvError(cat(where, ": \"shape\" ", shown(j["shape"].dump()), " holds more than ",
                         kLargestSpace, " values"));
    size *= d.get<long long>();
  }
  const auto n = static_cast<std::size_t>(size);
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> low, high;
  if (j.contains("low") || j.contains("high") || bounds_required) {
    if (!numbers(j.value("low", Json()), low) || !numbers(j.value("high", Json()), high) ||
        low.size() != n || high.size() != n)
      throw EnvError(cat(where, " needs \"low\" and \"high\": ", n, " numbers each"));
    for (std::size_t i = 0; i < n; ++i)
      if (!(low[i] <= high[i]) ||
          (bounds_required && !(std::isfinite(low[i]) && std::isfinite(high[i]))))
        throw EnvError(cat(where, ": low[", i, "] = ", low[i], " and high[", i, "] = ", high[i],
                           " are no bounds"));
  } else {
    low.assign(n, -inf);
    high.assign(n, inf);
  }
  return Space::box(std::move(low), std::move(high));
}

Json parsed(const std::string& line) {
  try {
    return Json::parse(line);
  } catch (const Json::exception&) {  // not JSON, or a number beyond a double's range
    throw EnvError(cat("sent a line that is not JSON: ", shown(line)));
  }
}

}  // namespace

std::string shown(const std::string& line) {
  return line.size() <= 200 ? line : line.substr(0, 200) + "...";
}

Declaration read_declaration(const std::string& line) {
  const Json hello = parsed(line);
  if (!hello.is_object() || hello.value("distml_env", Json()) != 1)
    throw EnvError(
        cat("its first line must declare it, like {\"distml_env\": 1, \"observation_space\": "
            "{\"shape\": [4]}, \"action_space\": {\"n\": 2}}; got ",
            shown(hello.dump())));
  Declaration d;
  d.observation = space_of(hello.value("observation_space", Json()), "observation_space",
                           /*bounds_required=*/false);
  if (d.observation.is_discrete())
    throw EnvError("\"observation_space\" must be a box (\"shape\"), not discrete");
  d.action = space_of(hello.value("action_space", Json()), "action_space",
                      /*bounds_required=*/true);
  return d;
}

Json read_answer(const std::string& line) {
  Json answer = parsed(line);
  if (!answer.is_object())
    throw EnvError(cat("answered with ", shown(answer.dump()), ", not an object"));
  if (answer.contains("error"))
    throw EnvError(cat("reports an error: ", answer["error"].is_string()
                                                 ? answer["error"].get<std::string>()
                                                 : answer["error"].dump()));
  return answer;
}

std::vector<float> observation_in(const Json& answer, const Space& space) {
  std::vector<float> observation;
  if (!numbers(answer.value("observation", Json()), observation) ||
      static_cast<int>(observation.size()) != space.size())
    throw EnvError(cat("its answer needs \"observation\": ", space.size(), " numbers; got ",
                       shown(answer.dump())));
  return observation;
}

StepResult step_in(const Json& answer, const Space& observation_space) {
  StepResult r;
  r.observation = observation_in(answer, observation_space);
  const Json reward = answer.value("reward", Json()),
             terminated = answer.value("terminated", Json()),
             truncated = answer.value("truncated", Json());
  if (!reward.is_number() || !terminated.is_boolean() || !truncated.is_boolean())
    throw EnvError(
        cat("a step's answer needs \"reward\" (a number), \"terminated\" and "
            "\"truncated\" (booleans); got ",
            shown(answer.dump())));
  r.reward = reward.get<double>();
  r.terminated = terminated.get<bool>();
  r.truncated = truncated.get<bool>();
  return r;
}

}  // namespace distml::rl::exec_protocol
