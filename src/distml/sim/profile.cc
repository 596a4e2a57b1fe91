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

// A parameter's optional "shape": a list of sizes.
std::vector<std::int64_t> read_shape(const nlohmann::json& shape, const std::string& where) {
  std::vector<std::int64_t> out;
  for (const auto& d : shape.is_array() ? shape : nlohmann::json::array({-1})) {
    if (!d.is_number_integer() || d.get<std::int64_t>() < 0)
      throw DataError(cat(where, ": \"shape\" is ", shape.dump(), ", not a list of sizes"));
    out.push_back(d.get<std::int64_t>());
  }
  return out;
}

// The optional "layer_names" and "layers" (rows ascending, a cost per name at each).
void read_layers(const nlohmann::json& j, const std::string& where, Profile& p) {
  if (!j.contains("layers")) return;
  if (!j.contains("layer_names") || !j.at("layer_names").is_array())
    throw DataError(cat(where, ": \"layers\" without a \"layer_names\" list"));
  for (const auto& name : j.at("layer_names")) {
    if (!name.is_string()) throw DataError(cat(where, ": \"layer_names\" holds ", name.dump()));
    p.layer_names.push_back(name.get<std::string>());
  }
  if (!j.at("layers").is_array()) throw DataError(cat(where, ": \"layers\" is not a list"));
  int i = 0;
  for (const auto& measured : j.at("layers")) {
    const std::string at = cat(where, ": layers[", i++, "]");
    LayersAt l{field<std::int64_t>(measured, "rows", at), {}};
    if (l.rows < 1 || (!p.layers.empty() && l.rows <= p.layers.back().rows))
      throw DataError(cat(at, ": \"rows\" must be at least 1 and ascending"));
    if (!measured.contains("costs") || !measured.at("costs").is_array() ||
        measured.at("costs").size() != p.layer_names.size())
      throw DataError(
          cat(at, ": expected \"costs\", one per layer name (", p.layer_names.size(), ")"));
    int k = 0;
    for (const auto& c : measured.at("costs")) {
      const std::string in = cat(at, ": costs[", k++, "]");
      l.costs.push_back({field<double>(c, "forward_s", in), field<double>(c, "backward_s", in),
                         field<double>(c, "output_bytes", in),
                         field<double>(c, "parameter_bytes", in), field<double>(c, "update_s", in),
                         field<double>(c, "copy_s", in)});
    }
    p.layers.push_back(std::move(l));
  }
}

}  // namespace

double Profile::gradient_bytes() const {
  double total = 0;
  for (const auto& p : parameters) total += p.bytes;
  return total;
}

std::vector<train::pipeline::LayerCost> Profile::layers_at(std::int64_t rows) const {
  if (layers.empty()) return {};
  auto at = layers.back();
  for (const auto& measured : layers)
    if (measured.rows >= rows) {
      at = measured;
      break;
    }
  // Compute in proportion to the rows, activations too; parameters as they are.
  const double scale = static_cast<double>(rows) / static_cast<double>(at.rows);
  for (auto& c : at.costs) {
    c.forward_s *= scale;
    c.backward_s *= scale;
    c.output_bytes *= scale;
  }
  return at.costs;
}

nlohmann::json profile_json(const Profile& p) {
  nlohmann::json parameters = nlohmann::json::array();
  for (const auto& q : p.parameters) {
    parameters.push_back({{"name", q.name}, {"bytes", q.bytes}, {"ready_s", q.ready_s}});
    if (!q.shape.empty()) parameters.back()["shape"] = q.shape;
  }
  nlohmann::json layers = nlohmann::json::array();
  for (const auto& at : p.layers) {
    nlohmann::json costs = nlohmann::json::array();
    for (const auto& c : at.costs)
      costs.push_back({{"forward_s", c.forward_s},
                       {"backward_s", c.backward_s},
                       {"output_bytes", c.output_bytes},
                       {"parameter_bytes", c.parameter_bytes},
                       {"update_s", c.update_s},
                       {"copy_s", c.copy_s}});
    layers.push_back({{"rows", at.rows}, {"costs", costs}});
  }
  nlohmann::json out = {
      {"format", kFormat},          {"version", Profile::kVersion}, {"model", p.model},
      {"dtype", p.dtype},           {"engine", p.engine},           {"batch_size", p.batch_size},
      {"world", p.world},           {"threads", p.threads},         {"cores", p.cores},
      {"steps", p.steps},           {"data_s", p.data_s},           {"forward_s", p.forward_s},
      {"backward_s", p.backward_s}, {"optimizer_s", p.optimizer_s}, {"other_s", p.other_s},
      {"step_s", p.step_s},         {"eval_s", p.eval_s},           {"parameters", parameters}};
  if (!p.layers.empty()) {
    out["layer_names"] = p.layer_names;
    out["layers"] = layers;
  }
  return out;
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
    if (q.contains("shape")) p.parameters.back().shape = read_shape(q.at("shape"), at);
  }
  read_layers(j, where, p);
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
