// Reads a config struct from TOML through a table of keys. Each key says where its value lives
// in the struct, what it accepts and how it prints, so parsing, the messages for typos and wrong
// values, `--set section.key=value` overrides and the canonical text all follow from one table.
// Rules between keys stay with each config (train/config.cc, rl/config.cc).
#pragma once

#include <toml++/toml.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "distml/core/error.h"

namespace distml::config {

// ---- Text helpers (config_schema.cc) -----------------------------------------------------

/// A TOML basic string ("..." with escapes), the same for every string in messages and output.
std::string toml_string(std::string_view s);

/// The shortest text that reads back as the same double, keeping ".0" so it stays a TOML float.
std::string format_float(double v);

/// A value found in a document as a message shows it after "got".
std::string describe(const toml::node& node);

/// "a, b, c".
std::string join(const std::vector<std::string>& items);

/// `s` without leading and trailing spaces and tabs.
std::string trim(std::string_view s);

/// Levenshtein distance counting a swap of two neighbours as one edit (`trian` -> `train`).
std::size_t edit_distance(std::string_view a, std::string_view b);

/// Parses a TOML document; a syntax error is a ConfigError "source:line:column: ...".
toml::table parse_document(const std::string& text, const std::string& source);

/// The value of an override as the one-key document {value = ...}: numbers, booleans and arrays
/// keep their types, and text that is not a TOML value becomes a string.
toml::table parse_override_value(const std::string& text);

/// The text of the file at `path`; a ConfigError naming it for a directory or a file that
/// cannot be opened or read.
std::string read_config_text(const std::string& path);

/// "[1, 2, 3]".
template <class Int>
std::string format_int_list(const std::vector<Int>& values) {
  std::string out = "[";
  for (std::size_t i = 0; i < values.size(); ++i)
    out += (i ? ", " : "") + std::to_string(values[i]);
  return out + "]";
}

// ---- Keys --------------------------------------------------------------------------------

/// One config key: its place in the document, what it accepts (completing "must be ..."), how a
/// TOML value is stored into a Config (false when the value does not fit, leaving the config as
/// it was) and how the stored value prints back as TOML.
template <class Config>
struct KeySpec {
  std::string section;
  std::string name;
  std::string expected;
  std::function<bool(const toml::node&, Config&)> assign;
  std::function<std::string(const Config&)> print;

  std::string dotted() const { return section + "." + name; }
};

/// The values a float key accepts; NaN and the infinities never fit. `text` completes
/// "a number ...".
struct Range {
  double lo, hi;
  bool lo_open, hi_open;
  std::string text;

  bool contains(double v) const {
    return std::isfinite(v) && (lo_open ? v > lo : v >= lo) && (hi_open ? v < hi : v <= hi);
  }
};

/// The ranges most keys need; a key with other bounds builds its own Range.
inline constexpr double kInf = std::numeric_limits<double>::infinity();
inline const Range kPositive{0, kInf, true, true, "> 0"};
inline const Range kNonNegative{0, kInf, false, true, ">= 0"};
inline const Range kOpenUnit{0, 1, true, true, "in (0, 1)"};
inline const Range kHalfOpenUnit{0, 1, false, true, "in [0, 1)"};
inline const Range kClosedUnit{0, 1, false, false, "in [0, 1]"};
inline const Range kAtLeastOne{1, kInf, false, true, ">= 1"};

/// A field of the config, as a generic lambda so that the same accessor serves the const
/// printer and the assigning setter: `CONFIG_FIELD(train.epochs)`.
#define CONFIG_FIELD(member) \
  [](auto& c) -> auto& { return c.member; }

/// The key builders for one config type, so that a table reads
/// `using K = config::Keys<TrainConfig>;` ... `K::int_key("train", "epochs", 1,
/// CONFIG_FIELD(train.epochs))`. `field` is a CONFIG_FIELD.
template <class Config>
struct Keys {
  /// An integer >= `min`, stored into whatever integer type the field has.
  template <class Field>
  static KeySpec<Config> int_key(std::string section, std::string name, std::int64_t min,
                                 Field field) {
    using Int = std::remove_reference_t<decltype(field(std::declval<Config&>()))>;
    return {std::move(section), std::move(name), cat("an integer >= ", min),
            [min, field](const toml::node& node, Config& c) {
              const std::optional<std::int64_t> v = node.value_exact<std::int64_t>();
              if (!v || *v < min) return false;
              field(c) = static_cast<Int>(*v);
              return true;
            },
            [field](const Config& c) { return std::to_string(field(c)); }};
  }

  /// A number in `range`; integers are accepted too: `lr = 1` means 1.0.
  template <class Field>
  static KeySpec<Config> float_key(std::string section, std::string name, const Range& range,
                                   Field field) {
    return {std::move(section), std::move(name), "a number " + range.text,
            [range, field](const toml::node& node, Config& c) {
              if (!node.is_number()) return false;
              const double v = *node.value<double>();
              if (!range.contains(v)) return false;
              field(c) = v;
              return true;
            },
            [field](const Config& c) { return format_float(field(c)); }};
  }

  /// true or false.
  template <class Field>
  static KeySpec<Config> bool_key(std::string section, std::string name, Field field) {
    return {std::move(section), std::move(name), "a boolean (true or false)",
            [field](const toml::node& node, Config& c) {
              const std::optional<bool> v = node.value_exact<bool>();
              if (v) field(c) = *v;
              return v.has_value();
            },
            [field](const Config& c) { return std::string(field(c) ? "true" : "false"); }};
  }

  /// Any string.
  template <class Field>
  static KeySpec<Config> string_key(std::string section, std::string name, Field field) {
    return {std::move(section), std::move(name), "a string",
            [field](const toml::node& node, Config& c) {
              std::optional<std::string> v = node.value_exact<std::string>();
              if (v) field(c) = std::move(*v);
              return v.has_value();
            },
            [field](const Config& c) { return toml_string(field(c)); }};
  }

  /// A string that must be one of `choices`.
  template <class Field>
  static KeySpec<Config> choice_key(std::string section, std::string name,
                                    std::vector<std::string> choices, Field field) {
    KeySpec<Config> spec = string_key(std::move(section), std::move(name), field);
    spec.expected = "one of " + join(choices);
    spec.assign = [choices = std::move(choices), field](const toml::node& node, Config& c) {
      const std::optional<std::string> v = node.value_exact<std::string>();
      if (!v || std::find(choices.begin(), choices.end(), *v) == choices.end()) return false;
      field(c) = *v;
      return true;
    };
    return spec;
  }

  /// An array of at least `min_count` integers, each >= `min`, into a vector of integers.
  template <class Field>
  static KeySpec<Config> int_list_key(std::string section, std::string name, std::size_t min_count,
                                      std::int64_t min, Field field) {
    return {std::move(section), std::move(name),
            cat("an array of at least ", min_count, " integers >= ", min),
            [min_count, min, field](const toml::node& node, Config& c) {
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
            [field](const Config& c) { return format_int_list(field(c)); }};
  }
};

// ---- The schema --------------------------------------------------------------------------

namespace detail {

// The names in a key table, apart from what the keys store: finding a key and the messages for
// unknown keys and sections do not depend on the config type, so they live in the .cc.
class KeyIndex {
 public:
  struct Name {
    std::string section, name;
  };
  // An override split into its key (an index into the table) and its value.
  struct Override {
    std::string source;  // "--set section.key=value", for messages
    std::size_t key;
    std::string text;   // the value as typed, trimmed
    toml::table value;  // {value = ...} from parse_override_value(text)
  };

  KeyIndex(std::vector<Name> names, std::string example_key);

  const std::vector<std::string>& keys() const { return dotted_; }
  const std::vector<std::string>& sections() const { return sections_; }
  bool is_section(std::string_view name) const;

  // The index of section.name, or of the nearest key, or nullopt.
  std::optional<std::size_t> find(std::string_view section, std::string_view name) const;
  std::optional<std::size_t> nearest_key(std::string_view section, std::string_view name) const;
  // The index of section.name, or a ConfigError from `source` suggesting the nearest key.
  std::size_t known_key(const std::string& source, std::string_view section,
                        std::string_view name) const;

  [[noreturn]] void throw_unknown_section(const std::string& source, std::string_view name) const;
  [[noreturn]] void throw_unknown_key(const std::string& source, std::string_view section,
                                      std::string_view name) const;

  // Splits "section.key=value", throwing for a malformed override or an unknown key.
  Override split_override(const std::string& override_text) const;

 private:
  std::vector<Name> names_;
  std::vector<std::string> dotted_;
  std::vector<std::string> sections_;  // in order of first use
  std::string example_key_;
};

}  // namespace detail

/// A config's key table and what follows from it. The table's order is the order of keys() and
/// canonical_text(); keep each section's keys together so that the text reads section by section.
template <class Config>
class Schema {
 public:
  /// `example_key` is shown in "the key must read section.key, like ..." when no key is close
  /// to what was typed; empty means the first key.
  explicit Schema(std::vector<KeySpec<Config>> specs, std::string example_key = "")
      : index_(names_of(specs), std::move(example_key)), specs_(std::move(specs)) {}

  /// Stores every key of `document` into `config`; a ConfigError from `source` for an unknown
  /// section or key (suggesting the nearest) or a value the key does not accept.
  /// With `origins` (one entry per key), records `source` for every key it sets.
  void apply_document(const toml::table& document, const std::string& source, Config& config,
                      std::vector<std::string>* origins = nullptr) const {
    for (auto&& [section_key, section_node] : document) {
      const std::string_view section = section_key.str();
      const toml::table* keys = section_node.as_table();
      if (!index_.is_section(section)) {
        if (keys) throw_unknown_section(source, section);
        throw_unknown_key(source, "", section);
      }
      if (!keys)
        throw ConfigError(cat(source, ": '", section, "' must be a section [", section, "], got ",
                              describe(section_node)));
      for (auto&& [name, value] : *keys) {
        const std::size_t key = index_.known_key(source, section, name.str());
        const KeySpec<Config>& spec = specs_[key];
        if (!spec.assign(value, config)) throw_wrong_value(source, spec, value);
        if (origins) (*origins)[key] = source;
      }
    }
  }

  /// Applies "section.key=value" (see parse_override_value). A value that TOML reads as another
  /// type is retried as its raw text, so that a string key takes `--set data.label=1` unquoted.
  /// With `origins`, records "--set section.key=value" for the key.
  void apply_override(const std::string& override_text, Config& config,
                      std::vector<std::string>* origins = nullptr) const {
    const detail::KeyIndex::Override parsed = index_.split_override(override_text);
    const KeySpec<Config>& spec = specs_[parsed.key];
    const toml::node& value = *parsed.value.get("value");
    if (!spec.assign(value, config) &&
        (value.is_string() || !spec.assign(toml::value<std::string>(parsed.text), config)))
      throw_wrong_value(parsed.source, spec, value);
    if (origins) (*origins)[parsed.key] = parsed.source;
  }

  /// Every key as a "section.key = value" line, in table order: itself a TOML document that
  /// reads back to the same config.
  std::string canonical_text(const Config& config) const {
    std::string text;
    for (const KeySpec<Config>& spec : specs_)
      text += spec.dotted() + " = " + spec.print(config) + "\n";
    return text;
  }

  /// Every "section.key", in table order.
  const std::vector<std::string>& keys() const { return index_.keys(); }
  /// The sections, in table order.
  const std::vector<std::string>& sections() const { return index_.sections(); }
  const std::vector<KeySpec<Config>>& specs() const { return specs_; }

  /// "source: unknown section 'x'; did you mean 'y'?" or the list of valid sections.
  [[noreturn]] void throw_unknown_section(const std::string& source, std::string_view name) const {
    index_.throw_unknown_section(source, name);
  }
  /// "source: unknown key 's.x'; did you mean 's.y'?" or the keys of the section. An empty
  /// `section` is a key outside any section.
  [[noreturn]] void throw_unknown_key(const std::string& source, std::string_view section,
                                      std::string_view name) const {
    index_.throw_unknown_key(source, section, name);
  }
  /// "source: key 's.x' must be <expected>, got <value>".
  [[noreturn]] void throw_wrong_value(const std::string& source, const KeySpec<Config>& spec,
                                      const toml::node& value) const {
    throw ConfigError(cat(source, ": key '", spec.dotted(), "' must be ", spec.expected, ", got ",
                          describe(value)));
  }

 private:
  static std::vector<detail::KeyIndex::Name> names_of(const std::vector<KeySpec<Config>>& specs) {
    std::vector<detail::KeyIndex::Name> names;
    for (const KeySpec<Config>& spec : specs) names.push_back({spec.section, spec.name});
    return names;
  }

  detail::KeyIndex index_;
  std::vector<KeySpec<Config>> specs_;
};

/// A value-initialised Config with the document `toml_text` (named `source` in messages) and then
/// each override applied in order. The rules between keys are the caller's to check afterwards.
/// With `origins`, it is resized to one entry per key: what set the key last (`source`, or
/// "--set section.key=value"), or empty where the default stands.
template <class Config>
Config parse_with(const Schema<Config>& schema, const std::string& toml_text,
                  const std::string& source, const std::vector<std::string>& overrides,
                  std::vector<std::string>* origins = nullptr) {
  Config config{};
  if (origins) origins->assign(schema.keys().size(), "");
  schema.apply_document(parse_document(toml_text, source), source, config, origins);
  for (const std::string& override_text : overrides)
    schema.apply_override(override_text, config, origins);
  return config;
}

}  // namespace distml::config
