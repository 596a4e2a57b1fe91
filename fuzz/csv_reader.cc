// Fuzzes the whole-file CSV reader (data/csv_reader.cc). The first byte picks the options (label
// column, label kind, delimiter), so that every combination is reached; the rest is the file.
#include "distml/data/csv_reader.h"

#include <cstdint>

#include "distml/core/error.h"
#include "fuzz_file.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  static distml::fuzz::FuzzFile file;
  const std::uint8_t choice = data[0];
  distml::data::CsvOptions options;
  options.label_index((choice & 1) ? 0 : -1);
  options.label_kind(static_cast<distml::data::LabelKind>((choice >> 1) % 3));
  static constexpr char kDelimiters[] = {',', ';', '\t', ' '};
  options.delimiter(kDelimiters[(choice >> 3) & 3]);
  if (choice & 0x20) options.label_name("label");
  try {
    distml::data::read_csv(file.write(data + 1, size - 1), options);
  } catch (const distml::DataError&) {
  }
  return 0;
}
