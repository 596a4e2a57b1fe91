// Fuzzes `distml train`'s configuration (train/config.cc over core/config_schema.cc): the TOML
// document and the `--set section.key=value` overrides. An input is the document, then
// optionally a line "#--set" followed by one override per line; a config that parses must
// print as canonical text that parses back to the same text.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "distml/core/error.h"
#include "distml/train/config.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  constexpr std::string_view kMarker = "\n#--set\n";
  const std::size_t cut = input.find(kMarker);
  const std::string document(input.substr(0, cut));
  std::vector<std::string> overrides;
  if (cut != std::string_view::npos) {
    std::string_view rest = input.substr(cut + kMarker.size());
    while (!rest.empty()) {
      const std::size_t nl = rest.find('\n');
      overrides.emplace_back(rest.substr(0, nl));
      rest.remove_prefix(nl == std::string_view::npos ? rest.size() : nl + 1);
    }
  }
  std::string text;
  try {
    text = distml::train::canonical_text(
        distml::train::parse_config(document, "fuzz.toml", overrides));
  } catch (const distml::ConfigError&) {
    return 0;
  } catch (const distml::UsageError&) {
    return 0;
  }
  // What a run prints and stores in its checkpoint must read back as itself.
  if (distml::train::canonical_text(distml::train::parse_config(text, "canonical")) != text)
    std::abort();
  return 0;
}
