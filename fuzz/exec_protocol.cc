// Fuzzes what distml reads from an exec: environment's process (rl/envs/exec_protocol.cc): the
// input's first line as the environment's declaration, each further line as an answer, read as
// a reset's and as a step's. A declaration that is accepted has a box of observations and
// actions of at least one value, with bounds in order; an observation that is accepted has the
// declared size. Anything else is refused with an EnvError.
#include "distml/rl/envs/exec_protocol.h"

#include <cstdint>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "distml/core/error.h"

namespace protocol = distml::rl::exec_protocol;

namespace {

void check_space(const distml::rl::Space& s) {
  if (s.size() < 1 || s.low.size() != s.high.size()) std::abort();
  if (s.is_discrete() && s.n < 1) std::abort();
  for (std::size_t i = 0; i < s.low.size(); ++i)
    if (!(s.low[i] <= s.high[i])) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  const auto next_line = [&] {
    const std::size_t nl = input.find('\n');
    const std::string line(input.substr(0, nl));
    input.remove_prefix(nl == std::string_view::npos ? input.size() : nl + 1);
    return line;
  };
  protocol::Declaration declared;
  try {
    declared = protocol::read_declaration(next_line());
  } catch (const distml::EnvError&) {
    return 0;
  }
  check_space(declared.observation);
  check_space(declared.action);
  if (declared.observation.is_discrete()) std::abort();
  while (!input.empty()) {
    try {
      const auto answer = protocol::read_answer(next_line());
      try {
        if (protocol::observation_in(answer, declared.observation).size() !=
            static_cast<std::size_t>(declared.observation.size()))
          std::abort();
      } catch (const distml::EnvError&) {
      }
      const auto step = protocol::step_in(answer, declared.observation);
      if (step.observation.size() != static_cast<std::size_t>(declared.observation.size()))
        std::abort();
    } catch (const distml::EnvError&) {
    }
  }
  return 0;
}
