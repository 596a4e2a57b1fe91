// A config target's input (fuzz/train_config.cc, fuzz/rl_config.cc): the TOML document, then
// optionally a line "#--set" followed by one `--set` override per line.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace distml::fuzz {

struct ConfigInput {
  std::string document;
  std::vector<std::string> overrides;
};

inline ConfigInput split_config_input(std::string_view input) {
  constexpr std::string_view kMarker = "\n#--set\n";
  const std::size_t cut = input.find(kMarker);
  ConfigInput out{std::string(input.substr(0, cut)), {}};
  if (cut == std::string_view::npos) return out;
  std::string_view rest = input.substr(cut + kMarker.size());
  while (!rest.empty()) {
    const std::size_t nl = rest.find('\n');
    out.overrides.emplace_back(rest.substr(0, nl));
    rest.remove_prefix(nl == std::string_view::npos ? rest.size() : nl + 1);
  }
  return out;
}

}  // namespace distml::fuzz
