#include "distml/sim/profile.h"

#include <fstream>
#include <sstream>

#include "distml/core/atomic_file.h"
#include "distml/core/error.h"

namespace distml::sim {
namespace {

constexpr const char* kFormat = "distml-profile";

// The value at `key` of `object`, of the type asked, or a DataError naming where it is.
template <class T>
T field(const nlohmann::json& object, const std::string& key, const std::string& where) {
  if (!object.is_object() || !object.contains(key))
    throw DataError(cat(where, ": no \"", key, "\""));
  const auto& value = object.at(key);
  const bool fits = std::is_same_v<T, std::string> ? value.is_string()
                    : std::is_integral_v<T>        ? value.is_number_integer()
                                                   : value.is_number();
  if (!fits)
    throw DataError(cat(where, ": \"", key, "\" is ", value.dump(), ", not a ",
                        std::is_same_v<T, std::string> ? "string" : "number"));
  const T v = value.get<T>();
  if constexpr (!std::is_same_v<T, std::string>)
    if (v < 0) throw DataError(cat(where, ": \"", key, "\" is negative (", v, ")"));
  return v;
}

}  // namespace

double Profile::gradient_bytes() const {
  double total = 0;
  for (const auto& p : parameters) total += p.bytes;
  return total;
}

nlohmann::json profile_json(const Profile& p) {
  nlohmann::json parameters = nlohmann::json::array();
  for (const auto& q : p.parameters)
    parameters.push_back({{"name", q.name}, {"bytes", q.bytes}, {"ready_s", q.ready_s}});
  return {
      {"format", kFormat},          {"version", Profile::kVersion}, {"model", p.model},
      {"dtype", p.dtype},           {"engine", p.engine},           {"batch_size", p.batch_size},
      {"world", p.world},           {"threads", p.threads},         {"cores", p.cores},
      {"steps", p.steps},           {"data_s", p.data_s},           {"forward_s", p.forward_s},
      {"backward_s", p.backward_s}, {"optimizer_s", p.optimizer_s}, {"other_s", p.other_s},
      {"step_s", p.step_s},         {"eval_s", p.eval_s},           {"parameters", parameters}};
}

Profile profile_from_json(const nlohmann::json& j, const std::string& where) {
  if (!j.is_object() || j.value("format", "") != kFormat)
    throw DataError(cat(where, ": not a distml profile (no \"format\": \"", kFormat,
                        "\"; distml train --profile FILE writes one)"));
  if (const int version = field<int>(j, "version", where); version != Profile::kVersion)
    throw DataError(cat(where, ": profile version ", version, "; this distml reads version ",
                        Profile::kVersion));
  Profile p;
  p.model = field<std::string>(j, "model", where);
  p.dtype = field<std::string>(j, "dtype", where);
  p.engine = field<std::string>(j, "engine", where);
  p.batch_size = field<std::int64_t>(j, "batch_size", where);
  p.world = field<int>(j, "world", where);
  p.threads = field<int>(j, "threads", where);
  p.cores = field<int>(j, "cores", where);
  p.steps = field<std::int64_t>(j, "steps", where);
  p.data_s = field<double>(j, "data_s", where);
  p.forward_s = field<double>(j, "forward_s", where);
  p.backward_s = field<double>(j, "backward_s", where);
  p.optimizer_s = field<double>(j, "optimizer_s", where);
  p.other_s = field<double>(j, "other_s", where);
  p.step_s = field<double>(j, "step_s", where);
  p.eval_s = field<double>(j, "eval_s", where);
  if (p.world < 1 || p.threads < 1 || p.cores < 1)
    throw DataError(cat(where, ": \"world\", \"threads\" and \"cores\" must be at least 1"));
  if (!j.contains("parameters") || !j.at("parameters").is_array())
    throw DataError(cat(where, ": no \"parameters\" list"));
  int i = 0;
  for (const auto& q : j.at("parameters")) {
    const std::string at = cat(where, ": parameters[", i++, "]");
    p.parameters.push_back({field<std::string>(q, "name", at), field<double>(q, "bytes", at),
                            field<double>(q, "ready_s", at)});
  }
  return p;
}

void write_profile(const Profile& profile, const std::string& path) {
  const std::string text = profile_json(profile).dump(1) + "\n";
  write_file_atomically(path, {text});
}

Profile read_profile(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw DataError(cat(path, ": cannot open the profile"));
  std::stringstream text;
  text << in.rdbuf();
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text.str());
  } catch (const nlohmann::json::parse_error& e) {
    throw DataError(cat(path, ": not JSON (", e.what(), ")"));
  }
  return profile_from_json(j, path);
}

}  // namespace distml::sim
