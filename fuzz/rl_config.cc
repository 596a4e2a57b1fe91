// Fuzzes `distml rl`'s configuration (rl/rl_config.cc over core/config_schema.cc): the TOML
// document and the `--set section.key=value` overrides, with the defaults that follow from the
// algorithm and the environment and the rules between keys (the input: fuzz/config_input.h); a
// config that is accepted prints as canonical text that reads back to the same text.
#include "distml/rl/rl_config.h"

#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "config_input.h"
#include "distml/core/error.h"
#include "fuzz_file.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static distml::fuzz::FuzzFile file, canonical;
  const auto [document, overrides] =
      distml::fuzz::split_config_input({reinterpret_cast<const char*>(data), size});
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
