// Fuzzes the host lists distml launch reads: a hostfile (cli/hostfile.cc), where the gloo
// engine's ranks start and whose first host is where they meet, and a host discovery script's
// output (cli/host_discovery.cc). A hostfile's hosts are distinct words without a comment in
// them, each with 1 to 1,000,000 slots; the discovered hosts are distinct words with slots unset
// (0) or at least 1. Anything else is refused with a UsageError.
#include "hostfile.h"

#include <cstdint>
#include <cstdlib>
#include <set>
#include <string>

#include "distml/core/error.h"
#include "fuzz_file.h"
#include "host_discovery.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static distml::fuzz::FuzzFile file;
  try {
    std::set<std::string> seen;
    for (const auto& h : distml::cli::read_hostfile(file.write(data, size))) {
      if (h.host.empty() || h.host.find_first_of(" \t\n\r\v\f#") != std::string::npos) std::abort();
      if (h.slots < 1 || h.slots > 1'000'000 || !seen.insert(h.host).second) std::abort();
    }
  } catch (const distml::UsageError&) {
  }
  try {
    std::set<std::string> seen;
    const std::string text(reinterpret_cast<const char*>(data), size);
    for (const auto& h : distml::cli::parse_host_list(text, "discovery")) {
      if (h.host.empty() || h.host.find_first_of(" \t\n:") != std::string::npos) std::abort();
      if (h.slots < 0 || !seen.insert(h.host).second) std::abort();
    }
  } catch (const distml::UsageError&) {
  }
  return 0;
}
