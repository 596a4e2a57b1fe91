// Fuzzes `distml train`'s configuration (train/config.cc over core/config_schema.cc): the TOML
// document and the `--set section.key=value` overrides (fuzz/config_input.h); a config that parses
// must print as canonical text that parses back to the same text.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "config_input.h"
#include "distml/core/error.h"
#include "distml/train/config.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto [document, overrides] =
      distml::fuzz::split_config_input({reinterpret_cast<const char*>(data), size});
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
