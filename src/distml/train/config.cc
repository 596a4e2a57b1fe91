// Reads the training configuration. Every key is one row of a table that says where the value
// lives in TrainConfig, what it accepts and how it prints, so parsing, validation, messages,
// config_keys() and canonical_text() all follow from that table and a new key is one row.
#include "distml/train/config.h"

#include <toml++/toml.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <limits>
#include <optional>
#include <sstream>
#include <string_view>
#include <type_traits>
#include <utility>

#include "distml/core/error.h"

namespace distml::train {
namespace {

// The strategies a run can name: a new strategy is one more entry here.
const std::vector<std::string>& strategy_names() {
  static const std::vector<std::string> names = {
      "allreduce", "ps", "local_sgd", "post_local_sgd", "easgd", "gossip", "zero"};
  return names;
}

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& item : items) out += (out.empty() ? "" : ", ") + item;
  return out;
}

std::string trim(std::string_view s) {
  const auto first = s.find_first_not_of(" \t");
  if (first == std::string_view::npos) return "";
  return std::string(s.substr(first, s.find_last_not_of(" \t") - first + 1));
}

// ---- Printing values as TOML -------------------------------------------------------------

// A TOML basic string: toml++'s own printer picks single quotes or multi-line literals, and
// messages and the canonical text should read the same way for every string.
std::string toml_string(std::string_view s) {
  std::string out = "\"";
  for (const char ch : s) {
    switch (ch) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (static_cast<unsigned char>(ch) < 0x20 || ch == 0x7f) {
          char escape[8];
          std::snprintf(escape, sizeof escape, "\\u%04x", static_cast<unsigned>(ch));
          out += escape;
        } else {
          out += ch;
        }
    }
  }
  return out + "\"";
}

// The shortest text that reads back as the same double, with ".0" kept so that it stays a
// TOML float: ranks hash the canonical text, so it must not depend on printf rounding.
std::string format_float(double v) {
  char buffer[32];
  char* end = std::to_chars(buffer, buffer + sizeof buffer, v).ptr;
  std::string s(buffer, end);
  if (s.find_first_not_of("-0123456789") == std::string::npos) s += ".0";
  return s;
}

template <class Int>
std::string format_int_list(const std::vector<Int>& values) {
  std::string out = "[";
  for (std::size_t i = 0; i < values.size(); ++i)
    out += (i ? ", " : "") + std::to_string(values[i]);
  return out + "]";
}

// A value found in a document, as a message shows it after "got".
std::string describe(const toml::node& node) {
  if (const auto* s = node.as_string()) return toml_string(s->get());
  if (const auto* i = node.as_integer()) return std::to_string(i->get());
  if (const auto* f = node.as_floating_point()) return format_float(f->get());
  if (const auto* b = node.as_boolean()) return b->get() ? "true" : "false";
  if (const auto* a = node.as_array()) {
    std::string out;
    for (const toml::node& element : *a) out += (out.empty() ? "" : ", ") + describe(element);
    return "[" + out + "]";
  }
  if (node.is_table()) return "a table";
  std::ostringstream s;  // dates and times
  node.visit([&](const auto& n) { s << n; });
  return s.str();
}

// ---- The key table -----------------------------------------------------------------------

// One config key: its place in the document, what it accepts (completing "must be ..."), how
// a TOML value is stored into a TrainConfig (false when the value does not fit, leaving the
// config as it was) and how the stored value prints back as TOML.
struct KeySpec {
  std::string section;
  std::string name;
  std::string expected;
  std::function<bool(const toml::node&, TrainConfig&)> assign;
  std::function<std::string(const TrainConfig&)> print;

  std::string dotted() const { return section + "." + name; }
};

// The values a float key accepts; NaN and the infinities never fit.
struct Range {
  double lo, hi;
  bool lo_open, hi_open;
  std::string text;

  bool contains(double v) const {
    return std::isfinite(v) && (lo_open ? v > lo : v >= lo) && (hi_open ? v < hi : v <= hi);
  }
};

constexpr double kInf = std::numeric_limits<double>::infinity();
const Range kPositive{0, kInf, true, true, "> 0"};
const Range kNonNegative{0, kInf, false, true, ">= 0"};
const Range kOpenUnit{0, 1, true, true, "in (0, 1)"};
const Range kHalfOpenUnit{0, 1, false, true, "in [0, 1)"};
const Range kClosedUnit{0, 1, false, false, "in [0, 1]"};
const Range kAtLeastOne{1, kInf, false, true, ">= 1"};

// A field of TrainConfig, as a generic lambda so the same accessor serves the const printer
// and the assigning setter.
#define CONFIG_FIELD(member) \
  [](auto& c) -> auto& { return c.member; }

template <class Field>
KeySpec int_key(std::string section, std::string name, std::int64_t min, Field field) {
  using Int = std::remove_reference_t<decltype(field(std::declval<TrainConfig&>()))>;
  return {std::move(section), std::move(name), cat("an integer >= ", min),
          [min, field](const toml::node& node, TrainConfig& c) {
            const std::optional<std::int64_t> v = node.value_exact<std::int64_t>();
            if (!v || *v < min) return false;
            field(c) = static_cast<Int>(*v);
            return true;
          },
          [field](const TrainConfig& c) { return std::to_string(field(c)); }};
}

// Integers are accepted too: `lr = 1` means 1.0.
template <class Field>
KeySpec float_key(std::string section, std::string name, const Range& range, Field field) {
  return {std::move(section), std::move(name), "a number " + range.text,
          [range, field](const toml::node& node, TrainConfig& c) {
            if (!node.is_number()) return false;
            const double v = *node.value<double>();
            if (!range.contains(v)) return false;
            field(c) = v;
            return true;
          },
          [field](const TrainConfig& c) { return format_float(field(c)); }};
}

template <class Field>
KeySpec bool_key(std::string section, std::string name, Field field) {
  return {std::move(section), std::move(name), "a boolean (true or false)",
          [field](const toml::node& node, TrainConfig& c) {
            const std::optional<bool> v = node.value_exact<bool>();
            if (v) field(c) = *v;
            return v.has_value();
          },
          [field](const TrainConfig& c) { return std::string(field(c) ? "true" : "false"); }};
}

template <class Field>
KeySpec string_key(std::string section, std::string name, Field field) {
  return {std::move(section), std::move(name), "a string",
          [field](const toml::node& node, TrainConfig& c) {
            std::optional<std::string> v = node.value_exact<std::string>();
            if (v) field(c) = std::move(*v);
            return v.has_value();
          },
          [field](const TrainConfig& c) { return toml_string(field(c)); }};
}

// A string that must be one of `choices`.
template <class Field>
KeySpec choice_key(std::string section, std::string name, std::vector<std::string> choices,
                   Field field) {
  KeySpec spec = string_key(std::move(section), std::move(name), field);
  spec.expected = "one of " + join(choices);
  spec.assign = [choices = std::move(choices), field](const toml::node& node, TrainConfig& c) {
    const std::optional<std::string> v = node.value_exact<std::string>();
    if (!v || std::find(choices.begin(), choices.end(), *v) == choices.end()) return false;
    field(c) = *v;
    return true;
  };
  return spec;
}

// An array of at least `min_count` integers, each >= `min`.
template <class Field>
KeySpec int_list_key(std::string section, std::string name, std::size_t min_count, std::int64_t min,
                     Field field) {
  return {std::move(section), std::move(name),
          cat("an array of at least ", min_count, " integers >= ", min),
          [min_count, min, field](const toml::node& node, TrainConfig& c) {
            const toml::array* array = node.as_array();
            if (!array || array->size() < min_count) return false;
            std::vector<std::int64_t> values;
            for (const toml::node& element : *array) {
              const std::optional<std::int64_t> v = element.value_exact<std::int64_t>();
              if (!v || *v < min) return false;
              values.push_back(*v);
            }
            field(c).assign(values.begin(), values.end());
            return true;
          },
          [field](const TrainConfig& c) { return format_int_list(field(c)); }};
}

// Every key in canonical order. The ranges are what the code that reads each value needs; the
// cross-key rules are in check_consistency().
const std::vector<KeySpec>& key_specs() {
  static const std::vector<KeySpec> specs = {
      choice_key("data", "dataset", {"mnist", "fashion-mnist", "csv", "text"},
                 CONFIG_FIELD(data.dataset)),
      string_key("data", "path", CONFIG_FIELD(data.path)),
      string_key("data", "test_path", CONFIG_FIELD(data.test_path)),
      float_key("data", "test_fraction", kOpenUnit, CONFIG_FIELD(data.test_fraction)),
      string_key("data", "label", CONFIG_FIELD(data.label)),
      int_key("data", "seq_len", 1, CONFIG_FIELD(data.seq_len)),

      choice_key("model", "name", nn::model_names(), CONFIG_FIELD(model.name)),
      int_list_key("model", "layers", 2, 1, CONFIG_FIELD(model.mlp_layers)),
      int_key("model", "embedding_dim", 1, CONFIG_FIELD(model.embedding_dim)),
      int_key("model", "hidden_size", 1, CONFIG_FIELD(model.hidden_size)),
      int_key("model", "lstm_layers", 1, CONFIG_FIELD(model.lstm_layers)),

      choice_key("optim", "name", {"sgd", "adam", "adamw"}, CONFIG_FIELD(optim.name)),
      float_key("optim", "lr", kPositive, CONFIG_FIELD(optim.lr)),
      float_key("optim", "momentum", kNonNegative, CONFIG_FIELD(optim.momentum)),
      bool_key("optim", "nesterov", CONFIG_FIELD(optim.nesterov)),
      float_key("optim", "weight_decay", kNonNegative, CONFIG_FIELD(optim.weight_decay)),
      float_key("optim", "beta1", kHalfOpenUnit, CONFIG_FIELD(optim.beta1)),
      float_key("optim", "beta2", kHalfOpenUnit, CONFIG_FIELD(optim.beta2)),
      float_key("optim", "eps", kPositive, CONFIG_FIELD(optim.eps)),
      bool_key("optim", "scale_lr", CONFIG_FIELD(scale_lr)),
      choice_key("optim", "schedule", {"constant", "step", "cosine"}, CONFIG_FIELD(schedule.name)),
      int_key("optim", "warmup_steps", 0, CONFIG_FIELD(schedule.warmup_steps)),
      int_key("optim", "step_size", 1, CONFIG_FIELD(schedule.step_size)),
      float_key("optim", "gamma", kPositive, CONFIG_FIELD(schedule.gamma)),
      float_key("optim", "min_lr", kNonNegative, CONFIG_FIELD(schedule.min_lr)),

      int_key("train", "epochs", 1, CONFIG_FIELD(train.epochs)),
      int_key("train", "max_steps", 0, CONFIG_FIELD(train.max_steps)),
      int_key("train", "batch_size", 1, CONFIG_FIELD(train.batch_size)),
      int_key("train", "accumulate", 1, CONFIG_FIELD(train.accumulate)),
      int_key("train", "seed", 0, CONFIG_FIELD(train.seed)),
      int_key("train", "threads", 1, CONFIG_FIELD(train.threads)),
      int_key("train", "log_every", 1, CONFIG_FIELD(train.log_every)),
      int_key("train", "eval_every", 0, CONFIG_FIELD(train.eval_every)),
      int_key("train", "checkpoint_every", 0, CONFIG_FIELD(train.checkpoint_every)),
      string_key("train", "checkpoint_dir", CONFIG_FIELD(train.checkpoint_dir)),
      string_key("train", "export", CONFIG_FIELD(train.export_path)),
      float_key("train", "timeout_s", kPositive, CONFIG_FIELD(train.timeout_s)),
      int_key("train", "slow_rank", -1, CONFIG_FIELD(train.slow_rank)),
      float_key("train", "slow_factor", kAtLeastOne, CONFIG_FIELD(train.slow_factor)),

      choice_key("strategy", "name", strategy_names(), CONFIG_FIELD(strategy.name)),
      float_key("strategy", "bucket_mb", kPositive, CONFIG_FIELD(strategy.bucket_mb)),
      float_key("strategy", "first_bucket_mb", kPositive, CONFIG_FIELD(strategy.first_bucket_mb)),
      choice_key("strategy", "algorithm", {"auto", "native", "ring", "hd", "tree"},
                 CONFIG_FIELD(strategy.algorithm)),
      bool_key("strategy", "find_unused_parameters", CONFIG_FIELD(strategy.find_unused_parameters)),
      int_key("strategy", "period", 1, CONFIG_FIELD(strategy.period)),
      int_key("strategy", "warmup_steps", 0, CONFIG_FIELD(strategy.warmup_steps)),
      bool_key("strategy", "average_optimizer_state",
               CONFIG_FIELD(strategy.average_optimizer_state)),
      float_key("strategy", "alpha", kClosedUnit, CONFIG_FIELD(strategy.alpha)),
      bool_key("strategy", "asynchronous", CONFIG_FIELD(strategy.asynchronous)),
      choice_key("strategy", "topology", {"ring", "exponential", "complete"},
                 CONFIG_FIELD(strategy.topology)),
      int_key("strategy", "stage", 1, CONFIG_FIELD(strategy.stage)),
      int_key("strategy", "servers", 1, CONFIG_FIELD(strategy.servers)),
      choice_key("strategy", "mode", {"bsp", "asp", "ssp"}, CONFIG_FIELD(strategy.mode)),
      int_key("strategy", "staleness", 0, CONFIG_FIELD(strategy.staleness)),
  };
  return specs;
}

#undef CONFIG_FIELD

const KeySpec* find_key(std::string_view section, std::string_view name) {
  for (const KeySpec& spec : key_specs())
    if (spec.section == section && spec.name == name) return &spec;
  return nullptr;
}

// The sections in canonical order.
const std::vector<std::string>& section_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const KeySpec& spec : key_specs())
      if (out.empty() || out.back() != spec.section) out.push_back(spec.section);
    return out;
  }();
  return names;
}

bool is_section(std::string_view name) {
  const auto& names = section_names();
  return std::find(names.begin(), names.end(), name) != names.end();
}

// ---- Suggestions for typos ---------------------------------------------------------------

// Levenshtein distance that also counts swapping two neighbours as one edit (optimal string
// alignment), because `trian` for `train` is the commonest typo and plain Levenshtein calls it
// two edits, too far for a five-letter word.
std::size_t edit_distance(std::string_view a, std::string_view b) {
  // d[i][j]: edits from the first i characters of a to the first j of b.
  std::vector<std::vector<std::size_t>> d(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
  for (std::size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t substitute = d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, substitute});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[a.size()][b.size()];
}

// How far `typed` is from `valid` as a share of its length; above a third they are unrelated.
double relative_distance(std::string_view typed, std::string_view valid) {
  return typed.empty() ? 1.0 : static_cast<double>(edit_distance(typed, valid)) / typed.size();
}
constexpr double kCloseEnough = 1.0 / 3;

// The valid key nearest a mistyped one, or nullptr if none is close. Keys of the same section
// are compared by the key part alone: the shared section name would dilute the distance, so
// that `optim.foo` would pass for `optim.eps`. Keys of other sections are compared as full
// dotted keys, and a key outside any section (empty `section`) with every key part.
const KeySpec* nearest_key(std::string_view section, std::string_view name) {
  const std::string dotted = section.empty() ? std::string(name) : cat(section, ".", name);
  const KeySpec* best = nullptr;
  double best_distance = kCloseEnough;
  for (const KeySpec& spec : key_specs()) {
    const double d = section.empty() || section == spec.section
                         ? relative_distance(name, spec.name)
                         : relative_distance(dotted, spec.dotted());
    if (d <= best_distance && (!best || d < best_distance)) {
      best = &spec;
      best_distance = d;
    }
  }
  return best;
}

std::string nearest_section(std::string_view name) {
  std::string best;
  double best_distance = kCloseEnough;
  for (const std::string& section : section_names()) {
    const double d = relative_distance(name, section);
    if (d <= best_distance && (best.empty() || d < best_distance)) {
      best = section;
      best_distance = d;
    }
  }
  return best;
}

[[noreturn]] void throw_unknown_section(const std::string& source, std::string_view name) {
  const std::string near = nearest_section(name);
  if (!near.empty())
    throw ConfigError(cat(source, ": unknown section '", name, "'; did you mean '", near, "'?"));
  throw ConfigError(
      cat(source, ": unknown section '", name, "'; valid sections: ", join(section_names())));
}

[[noreturn]] void throw_unknown_key(const std::string& source, std::string_view section,
                                    std::string_view name) {
  const std::string dotted = section.empty() ? std::string(name) : cat(section, ".", name);
  if (const KeySpec* near = nearest_key(section, name))
    throw ConfigError(
        cat(source, ": unknown key '", dotted, "'; did you mean '", near->dotted(), "'?"));
  if (section.empty())
    throw ConfigError(cat(source, ": unknown key '", dotted,
                          "'; every key belongs to a section: ", join(section_names())));
  std::vector<std::string> names;
  for (const KeySpec& spec : key_specs())
    if (spec.section == section) names.push_back(spec.name);
  throw ConfigError(
      cat(source, ": unknown key '", dotted, "'; valid keys in [", section, "]: ", join(names)));
}

// ---- Applying documents and overrides ----------------------------------------------------

// The spec of a key, or a ConfigError from `source` suggesting the nearest one.
const KeySpec& known_key(const std::string& source, std::string_view section,
                         std::string_view name) {
  const KeySpec* spec = find_key(section, name);
  if (!spec) throw_unknown_key(source, section, name);
  return *spec;
}

[[noreturn]] void throw_wrong_value(const std::string& source, const KeySpec& spec,
                                    const toml::node& value) {
  throw ConfigError(cat(source, ": key '", spec.dotted(), "' must be ", spec.expected, ", got ",
                        describe(value)));
}

toml::table parse_document(const std::string& text, const std::string& source) {
  try {
    return toml::parse(text, std::string_view(source));
  } catch (const toml::parse_error& e) {
    throw ConfigError(cat(source, ":", e.source().begin.line, ":", e.source().begin.column,
                          ": TOML syntax error: ", e.description()));
  }
}

void apply_document(const toml::table& document, const std::string& source, TrainConfig& config) {
  for (auto&& [section_key, section_node] : document) {
    const std::string_view section = section_key.str();
    const toml::table* keys = section_node.as_table();
    if (!is_section(section)) {
      if (keys) throw_unknown_section(source, section);
      throw_unknown_key(source, "", section);
    }
    if (!keys)
      throw ConfigError(cat(source, ": '", section, "' must be a section [", section, "], got ",
                            describe(section_node)));
    for (auto&& [name, value] : *keys) {
      const KeySpec& spec = known_key(source, section, name.str());
      if (!spec.assign(value, config)) throw_wrong_value(source, spec, value);
    }
  }
}

// The value of an override as a one-key TOML document: numbers, booleans and arrays keep their
// types, and text that is not TOML becomes a string, so `data.dataset=fashion-mnist` needs no
// quotes.
toml::table parse_override_value(const std::string& text) {
  try {
    toml::table document = toml::parse("value = " + text);
    if (document.size() == 1) return document;  // not `1\nother = 2` smuggled in
  } catch (const toml::parse_error&) {
  }
  return toml::table{{"value", text}};
}

// Applies "section.key=value". A value that TOML reads as another type is retried as its raw
// text, so that a string key takes `--set data.label=1` (a column named "1") unquoted.
void apply_override(const std::string& override_text, TrainConfig& config) {
  const std::string source = "--set " + override_text;
  const auto equals = override_text.find('=');
  if (equals == std::string::npos)
    throw ConfigError(cat(source, ": an override must read section.key=value"));
  const std::string key = trim(std::string_view(override_text).substr(0, equals));
  const std::string text = trim(std::string_view(override_text).substr(equals + 1));
  const auto dot = key.find('.');
  if (dot == std::string::npos || dot == 0 || dot + 1 == key.size()) {
    const KeySpec* near = nearest_key("", key);
    throw ConfigError(cat(source, ": the key must read section.key, like ",
                          near ? near->dotted() : "train.epochs"));
  }
  const std::string section = key.substr(0, dot);
  const std::string name = key.substr(dot + 1);
  if (!is_section(section)) throw_unknown_section(source, section);
  const KeySpec& spec = known_key(source, section, name);
  const toml::table parsed = parse_override_value(text);
  const toml::node& value = *parsed.get("value");
  if (spec.assign(value, config)) return;
  if (!value.is_string() && spec.assign(toml::value<std::string>(text), config)) return;
  throw_wrong_value(source, spec, value);
}

// Rules that involve more than one key; checked once the file and every override are in.
void check_consistency(const TrainConfig& c) {
  if (c.optim.nesterov && !(c.optim.momentum > 0))
    throw ConfigError(cat(c.source, ": optim.nesterov = true needs optim.momentum > 0, got ",
                          format_float(c.optim.momentum)));
  if (c.strategy.stage > 2)
    throw ConfigError(
        cat(c.source, ": strategy.stage: expected 1 or 2 (ZeRO stages), got ", c.strategy.stage));
}

}  // namespace

TrainConfig load_config(const std::string& path, const std::vector<std::string>& overrides) {
  std::error_code ignored;
  if (std::filesystem::is_directory(path, ignored))
    throw ConfigError(cat(path, ": is a directory, not a config file"));
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError(cat(path, ": cannot open the config file: ", std::strerror(errno)));
  const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  if (in.bad()) throw ConfigError(cat(path, ": cannot read the config file"));
  return parse_config(text, path, overrides);
}

TrainConfig parse_config(const std::string& toml_text, const std::string& source,
                         const std::vector<std::string>& overrides) {
  TrainConfig config;
  config.source = source;
  apply_document(parse_document(toml_text, source), source, config);
  for (const std::string& override_text : overrides) apply_override(override_text, config);
  check_consistency(config);
  return config;
}

std::string canonical_text(const TrainConfig& config) {
  std::string text;
  for (const KeySpec& spec : key_specs()) text += spec.dotted() + " = " + spec.print(config) + "\n";
  return text;
}

const std::vector<std::string>& config_keys() {
  static const std::vector<std::string> keys = [] {
    std::vector<std::string> out;
    for (const KeySpec& spec : key_specs()) out.push_back(spec.dotted());
    return out;
  }();
  return keys;
}

}  // namespace distml::train
