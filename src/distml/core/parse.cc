#include "distml/core/parse.h"

#include <cctype>
#include <limits>

#include "distml/core/error.h"

namespace distml {

std::uint64_t parse_bytes(std::string_view text, std::string_view what) {
  auto bad = [&] {
    return UsageError(
        cat(what, ": '", text, "' is not a byte count (expected e.g. 4, 1K, 64K, 16M, 1G)"));
  };
  if (text.empty()) throw bad();
  std::uint64_t value = 0;
  size_t i = 0;
  for (; i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])); ++i) {
    if (value > (std::numeric_limits<std::uint64_t>::max() - 9) / 10) throw bad();
    value = value * 10 + static_cast<std::uint64_t>(text[i] - '0');
  }
  if (i == 0) throw bad();
  std::uint64_t scale = 1;
  if (i < text.size()) {
    switch (std::toupper(static_cast<unsigned char>(text[i]))) {
      case 'K': scale = 1ull << 10; break;
      case 'M': scale = 1ull << 20; break;
      case 'G': scale = 1ull << 30; break;
      default: throw bad();
    }
    ++i;
    if (i < text.size() && std::toupper(static_cast<unsigned char>(text[i])) == 'I') ++i;
    if (i < text.size() && std::toupper(static_cast<unsigned char>(text[i])) == 'B') ++i;
  }
  if (i != text.size()) throw bad();
  return value * scale;
}

std::vector<std::string> split_list(std::string_view text, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(sep, start);
    if (end == std::string_view::npos) end = text.size();
    if (end > start) out.emplace_back(text.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

std::string format_bytes(std::uint64_t bytes) {
  const char* suffix[] = {"", "K", "M", "G"};
  int i = 0;
  while (i < 3 && bytes >= 1024 && bytes % 1024 == 0) {
    bytes /= 1024;
    ++i;
  }
  return cat(bytes, suffix[i]);
}

std::string counted(long long n, std::string_view noun, std::string_view plural) {
  std::string text = std::to_string(n) + " ";
  if (n == 1) return text.append(noun);
  return plural.empty() ? text.append(noun).append("s") : text.append(plural);
}

}  // namespace distml
