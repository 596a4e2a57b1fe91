// Fuzzes `distml rl`'s configuration (rl/rl_config.cc over core/config_schema.cc): the TOML
// document and the `--set section.key=value` overrides, with the defaults that follow from the
// algorithm and the environment and the rules between keys. An input is the document, then
// optionally a line "#--set" followed by one override per line (as fuzz/train_config.cc); a
// config that is accepted prints as canonical text that reads back to the same text.
#include "distml/rl/rl_config.h"

#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "distml/core/error.h"
#include "fuzz_file.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static distml::fuzz::FuzzFile file, canonical;
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  constexpr std::string_view kMarker = "\n#--set\n";
  const std::size_t cut = input.find(kMarker);
  const std::string_view document = input.substr(0, cut);
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
    const auto path =
        file.write(reinterpret_cast<const std::uint8_t*>(document.data()), document.size());
    text = distml::rl::canonical_text(distml::rl::load_rl_config(path, overrides));
  } catch (const distml::ConfigError&) {
    return 0;
  } catch (const distml::UsageError&) {
    return 0;
  }
  // What a run prints and its ranks compare must read back as itself.
  const auto path =
      canonical.write(reinterpret_cast<const std::uint8_t*>(text.data()), text.size());
  if (distml::rl::canonical_text(distml::rl::load_rl_config(path, {})) != text) std::abort();
  return 0;
}
