// The pieces of CSV parsing that the whole-file reader and the row-sharded reader share.
#pragma once

#include <charconv>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace distml::data::csv {

/// Without surrounding blanks (and a trailing '\r' of CRLF lines).
inline std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

/// The whole field as a number (a leading '+' allowed), or nullopt.
template <class Number>
std::optional<Number> parse(std::string_view s) {
  Number v{};
  const char* begin = s.data();
  if (!s.empty() && s[0] == '+') ++begin;
  const auto [end, ec] = std::from_chars(begin, s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || begin == end) return std::nullopt;
  return v;
}
inline std::optional<double> parse_number(std::string_view s) { return parse<double>(s); }
template <class Int = std::int64_t>
std::optional<Int> parse_integer(std::string_view s) {
  return parse<Int>(s);
}

/// Splits one line into trimmed fields, unquoting "..." fields ("" is a quote inside one).
/// DataError naming `path`, `line_no` and the column on an unterminated quote.
std::vector<std::string> split_fields(std::string_view line, char delim, const std::string& path,
                                      std::size_t line_no);

}  // namespace distml::data::csv
