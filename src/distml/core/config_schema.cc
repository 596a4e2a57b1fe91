// The parts of config_schema.h that do not depend on the config type: printing values, reading
// documents and overrides, and finding the nearest key for a typo.
#include "distml/core/config_schema.h"

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>

namespace distml::config {
namespace {

// How far `typed` is from `valid` as a share of its length; above a third they are unrelated.
double relative_distance(std::string_view typed, std::string_view valid) {
  return typed.empty() ? 1.0 : static_cast<double>(edit_distance(typed, valid)) / typed.size();
}
constexpr double kCloseEnough = 1.0 / 3;

std::string dotted(std::string_view section, std::string_view name) {
  return section.empty() ? std::string(name) : cat(section, ".", name);
}

// Where `text` stops being UTF-8 (a stray continuation byte, a sequence cut short, an overlong
// or surrogate form, a code point above U+10FFFF); npos when it is UTF-8 throughout. A TOML
// document must be UTF-8: a --set value that is not would make canonical text no TOML reads.
std::size_t first_invalid_utf8(std::string_view text) {
  std::size_t i = 0;
  while (i < text.size()) {
    const auto lead = static_cast<unsigned char>(text[i]);
    const std::size_t length = lead < 0x80       ? 1
                               : lead >> 5 == 6  ? 2
                               : lead >> 4 == 14 ? 3
                               : lead >> 3 == 30 ? 4
                                                 : 0;
    if (length == 0 || i + length > text.size()) return i;
    std::uint32_t code = length == 1 ? lead : lead & (0x7F >> length);
    for (std::size_t k = 1; k < length; ++k) {
      const auto next = static_cast<unsigned char>(text[i + k]);
      if (next >> 6 != 2) return i;
      code = code << 6 | (next & 0x3F);
    }
    static constexpr std::uint32_t kSmallest[] = {0, 0, 0x80, 0x800, 0x10000};
    if (code < kSmallest[length] || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) return i;
    i += length;
  }
  return std::string_view::npos;
}

}  // namespace

// ---- Text helpers ------------------------------------------------------------------------

// toml++'s own printer picks single quotes or multi-line literals, and messages and the
// canonical text should read the same way for every string.
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

// Ranks hash the canonical text, so it must not depend on printf rounding.
std::string format_float(double v) {
  char buffer[32];
  char* end = std::to_chars(buffer, buffer + sizeof buffer, v).ptr;
  std::string s(buffer, end);
  if (s.find_first_not_of("-0123456789") == std::string::npos) s += ".0";
  return s;
}

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

// Optimal string alignment: `trian` for `train` is the commonest typo, and plain Levenshtein
// calls it two edits, too far for a five-letter word.
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

toml::table parse_document(const std::string& text, const std::string& source) {
  try {
    return toml::parse(text, std::string_view(source));
  } catch (const toml::parse_error& e) {
    throw ConfigError(cat(source, ":", e.source().begin.line, ":", e.source().begin.column,
                          ": TOML syntax error: ", e.description()));
  }
}

toml::table parse_override_value(const std::string& text) {
  try {
    toml::table document = toml::parse("value = " + text);
    if (document.size() == 1) return document;  // not `1\nother = 2` smuggled in
  } catch (const toml::parse_error&) {
  }
  return toml::table{{"value", text}};
}

std::string read_config_text(const std::string& path) {
  std::error_code ignored;
  if (std::filesystem::is_directory(path, ignored))
    throw ConfigError(cat(path, ": is a directory, not a config file"));
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError(cat(path, ": cannot open the config file: ", std::strerror(errno)));
  std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  if (in.bad()) throw ConfigError(cat(path, ": cannot read the config file"));
  return text;
}

// ---- KeyIndex ----------------------------------------------------------------------------

namespace detail {

KeyIndex::KeyIndex(std::vector<Name> names, std::string example_key)
    : names_(std::move(names)), example_key_(std::move(example_key)) {
  for (const Name& n : names_) {
    dotted_.push_back(n.section + "." + n.name);  // as KeySpec::dotted()
    if (!is_section(n.section)) sections_.push_back(n.section);
  }
  if (example_key_.empty() && !dotted_.empty()) example_key_ = dotted_.front();
}

bool KeyIndex::is_section(std::string_view name) const {
  return std::find(sections_.begin(), sections_.end(), name) != sections_.end();
}

std::optional<std::size_t> KeyIndex::find(std::string_view section, std::string_view name) const {
  for (std::size_t i = 0; i < names_.size(); ++i)
    if (names_[i].section == section && names_[i].name == name) return i;
  return std::nullopt;
}

// Keys of the same section are compared by the key part alone: the shared section name would
// dilute the distance, so that `optim.foo` would pass for `optim.eps`. Keys of other sections
// are compared as full dotted keys, and a key outside any section (empty `section`) with every
// key part.
std::optional<std::size_t> KeyIndex::nearest_key(std::string_view section,
                                                 std::string_view name) const {
  const std::string typed = dotted(section, name);
  std::optional<std::size_t> best;
  double best_distance = kCloseEnough;
  for (std::size_t i = 0; i < names_.size(); ++i) {
    const double d = section.empty() || section == names_[i].section
                         ? relative_distance(name, names_[i].name)
                         : relative_distance(typed, dotted_[i]);
    if (d <= best_distance && (!best || d < best_distance)) {
      best = i;
      best_distance = d;
    }
  }
  return best;
}

std::size_t KeyIndex::known_key(const std::string& source, std::string_view section,
                                std::string_view name) const {
  const std::optional<std::size_t> key = find(section, name);
  if (!key) throw_unknown_key(source, section, name);
  return *key;
}

void KeyIndex::throw_unknown_section(const std::string& source, std::string_view name) const {
  std::string near;
  double best_distance = kCloseEnough;
  for (const std::string& section : sections_) {
    const double d = relative_distance(name, section);
    if (d <= best_distance && (near.empty() || d < best_distance)) {
      near = section;
      best_distance = d;
    }
  }
  if (!near.empty())
    throw ConfigError(cat(source, ": unknown section '", name, "'; did you mean '", near, "'?"));
  throw ConfigError(
      cat(source, ": unknown section '", name, "'; valid sections: ", join(sections_)));
}

void KeyIndex::throw_unknown_key(const std::string& source, std::string_view section,
                                 std::string_view name) const {
  const std::string typed = dotted(section, name);
  if (const std::optional<std::size_t> near = nearest_key(section, name))
    throw ConfigError(
        cat(source, ": unknown key '", typed, "'; did you mean '", dotted_[*near], "'?"));
  if (section.empty())
    throw ConfigError(cat(source, ": unknown key '", typed,
                          "'; every key belongs to a section: ", join(sections_)));
  std::vector<std::string> in_section;
  for (const Name& n : names_)
    if (n.section == section) in_section.push_back(n.name);
  throw ConfigError(cat(source, ": unknown key '", typed, "'; valid keys in [", section,
                        "]: ", join(in_section)));
}

KeyIndex::Override KeyIndex::split_override(const std::string& override_text) const {
  const std::string source = "--set " + override_text;
  const auto equals = override_text.find('=');
  if (equals == std::string::npos)
    throw ConfigError(cat(source, ": an override must read section.key=value"));
  const std::string key = trim(std::string_view(override_text).substr(0, equals));
  std::string text = trim(std::string_view(override_text).substr(equals + 1));
  const auto dot = key.find('.');
  if (dot == std::string::npos || dot == 0 || dot + 1 == key.size()) {
    const std::optional<std::size_t> near = nearest_key("", key);
    throw ConfigError(cat(source, ": the key must read section.key, like ",
                          near ? dotted_[*near] : example_key_));
  }
  const std::string section = key.substr(0, dot);
  const std::string name = key.substr(dot + 1);
  if (!is_section(section)) throw_unknown_section(source, section);
  const std::size_t index = known_key(source, section, name);
  if (const std::size_t bad = first_invalid_utf8(text); bad != std::string_view::npos)
    throw ConfigError(cat("--set ", key, ": the value is not UTF-8 (byte ", bad + 1, " of it is ",
                          "not where a character can start or go on)"));
  toml::table value = parse_override_value(text);
  return {source, index, std::move(text), std::move(value)};
}

}  // namespace detail
}  // namespace distml::config
