// Fuzzes the hostfile reader of distml launch (cli/hostfile.cc): the host it finds first, where
// the gloo ranks meet, is one word without a comment in it, or the file is refused with a
// UsageError.
#include "hostfile.h"

#include <cstdint>
#include <cstdlib>
#include <string>

#include "distml/core/error.h"
#include "fuzz_file.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static distml::fuzz::FuzzFile file;
  try {
    const std::string host = distml::cli::first_host(file.write(data, size));
    if (host.empty() || host.find_first_of(" \t\n\r\v\f#") != std::string::npos) std::abort();
  } catch (const distml::UsageError&) {
  }
  return 0;
}
