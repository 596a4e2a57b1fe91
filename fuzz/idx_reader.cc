// Fuzzes the IDX reader (data/idx_reader.cc): headers, dimensions whose product overflows or
// exceeds the file, gzip streams, and the images/labels pair checks.
#include "distml/data/idx_reader.h"

#include <cstdint>

#include "distml/core/error.h"
#include "fuzz_file.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static distml::fuzz::FuzzFile file;
  const std::string& path = file.write(data, size);
  try {
    distml::data::read_idx(path);
  } catch (const distml::DataError&) {
  }
  try {  // one file as both halves: the pair's type, rank and count checks
    distml::data::load_idx_pair(path, path);
  } catch (const distml::DataError&) {
  }
  return 0;
}
