// Reader for IDX files, the format of MNIST and Fashion-MNIST, raw or gzip-compressed.
// Layout: bytes 0-1 zero, byte 2 the element type, byte 3 the rank, then `rank` big-endian
// u32 dimensions, then the elements in row-major order (multi-byte elements big-endian).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "distml/data/dataset.h"

namespace distml::data {

/// Element type codes of the IDX format (byte 2 of the magic number).
enum class IdxType : std::uint8_t {
  kU8 = 0x08,
  kI8 = 0x09,
  kI16 = 0x0B,
  kI32 = 0x0C,
  kF32 = 0x0D,
  kF64 = 0x0E,
};

/// Name of an IDX element type for messages ("u8", "f32", ...).
const char* idx_type_name(IdxType type);

/// The contents of one IDX file. u8 files keep their bytes in `u8`; every other type is
/// converted to double in `values` (exact for all IDX types).
struct IdxArray {
  IdxType type = IdxType::kU8;
  std::vector<std::size_t> dims;
  std::vector<std::uint8_t> u8;
  std::vector<double> values;

  /// Number of elements: the product of dims.
  std::size_t size() const;
};

/// An IDX file's header: element type, dimensions, and where the elements start.
struct IdxHeader {
  IdxType type = IdxType::kU8;
  std::vector<std::size_t> dims;
  std::size_t element_bytes = 1;
  std::size_t count = 1;          // the product of dims
  std::uint64_t data_offset = 0;  // 4 + 4 * rank
};

/// Reads and checks the header through `read(dst, n)`, which returns the bytes it delivered
/// (fewer only at the end of the file). DataError naming `path` and the offset (followed by
/// `where`, e.g. " (decompressed)") on a bad magic number, a truncated header or a size too
/// large to address.
IdxHeader read_idx_header(const std::function<std::size_t(void*, std::size_t)>& read,
                          const std::string& path, std::string_view where = "");

/// Reads an IDX file; gzip is detected from its magic bytes (1f 8b). Throws DataError naming
/// the file and the offset (in the decompressed stream for gzip) on a bad magic number, a
/// truncated file or trailing bytes after the last element.
IdxArray read_idx(const std::string& path);

/// Reads an images file (u8, rank >= 1, N x ...) and a labels file (integer type, rank 1, N)
/// into a Dataset with features scaled from 0..255 to [0, 1]. Throws DataError naming the
/// file when a type or rank is wrong or the two counts differ.
Dataset load_idx_pair(const std::string& images_path, const std::string& labels_path);

}  // namespace distml::data
