// Fuzzes the .npz reader (data/npz_reader.cc): the zip container (libzip), each .npy header's
// dict literal, and the rows a training run reads, as one rank of one would.
#include "distml/data/npz_reader.h"

#include <cstdint>

#include "distml/core/error.h"
#include "fuzz_file.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static distml::fuzz::FuzzFile file;
  const std::string& path = file.write(data, size);
  try {
    const distml::data::NpzFile npz(path);
    const distml::data::NpzLayout layout = distml::data::npz_layout(npz);
    distml::data::read_npz_rows(path, 0, layout.x.rows());
  } catch (const distml::DataError&) {
  }
  return 0;
}
