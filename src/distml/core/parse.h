// Parsing of numbers and byte sizes given on the command line or in config ("64K", "1M").
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace distml {

/// Parses a non-negative byte count with an optional K/M/G suffix (powers of 1024).
/// Throws UsageError naming `what` when the text is not such a number.
std::uint64_t parse_bytes(std::string_view text, std::string_view what);

/// Splits "a,b,c" into its non-empty pieces.
std::vector<std::string> split_list(std::string_view text, char sep = ',');

/// Formats a byte count the way parse_bytes reads it back, e.g. 65536 -> "64K".
std::string format_bytes(std::uint64_t bytes);

/// "1 rank", "3 ranks": `n` with the noun in the number it takes (`plural`, where empty: the
/// noun and an "s").
std::string counted(long long n, std::string_view noun, std::string_view plural = {});

}  // namespace distml
